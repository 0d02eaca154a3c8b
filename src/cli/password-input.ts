import { text } from 'node:stream/consumers';
import { read } from 'read';

/** Where a CLI command's new password comes from, as its options say. */
export interface PasswordOptions {
  /** `--password PW`: kept for scripts, but it lands in shell history and the process list. */
  password?: string;
  /** `--password-stdin`: all of standard input. */
  passwordStdin?: boolean;
}

export interface PasswordIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  /** Asks once on the terminal, without echo. */
  ask(prompt: string): Promise<string>;
}

/** A password that cannot be had as the options ask: one line, the CLI prints it alone. */
export class PasswordInputError extends Error {}

/** A no-echo prompt on the terminal, written to stderr so that stdout stays the command's JSON. */
export function askOnTerminal(prompt: string): Promise<string> {
  return read({ prompt, silent: true, replace: '', terminal: true, output: process.stderr }).catch((error: Error) => {
    process.stderr.write('\n'); // the line holding the prompt was left open
    throw new PasswordInputError(`no password given: ${error.message}`);
  });
}

export const terminalIo: PasswordIo = { stdin: process.stdin, ask: askOnTerminal };

/**
 * The new password of `account create` and `account set-password`: from stdin with
 * `--password-stdin` (as `docker login` does: one trailing newline, which `echo` and a file
 * add, is not part of it), from `--password`, or, with neither and a terminal on stdin,
 * from a prompt asked twice, since a typo nobody saw would lock the account out.
 */
export async function readNewPassword(options: PasswordOptions, io: PasswordIo = terminalIo): Promise<string> {
  if (options.password !== undefined && options.passwordStdin) {
    throw new PasswordInputError('give either --password or --password-stdin, not both');
  }
  if (options.passwordStdin) return (await text(io.stdin)).replace(/\r?\n$/, '');
  if (options.password !== undefined) return options.password;
  if (!io.stdin.isTTY) {
    throw new PasswordInputError(
      'no password given: pipe it in with --password-stdin, or run the command in a terminal to be asked for it',
    );
  }
  const first = await io.ask('Password:');
  const second = await io.ask('Password again:');
  if (first !== second) throw new PasswordInputError('the two passwords differ; nothing was changed');
  return first;
}
