import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import type { Readable } from 'node:stream';

export const HERALD = new URL('../../bin/herald', import.meta.url).pathname;

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `bin/herald` to its end, `input` written to its stdin (a pipe, never a TTY). A command
 * that does not end in a minute (a serve that should have been refused) is killed: its test
 * fails on the code instead of hanging.
 */
export async function herald(args: string[], env: Record<string, string>, input = ''): Promise<Finished> {
  const child = spawn(HERALD, args, { env: { ...process.env, LOG_LEVEL: 'silent', ...env }, timeout: 60_000 });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  child.stdin.on('error', () => {}); // a child that exits without reading its input
  child.stdin.end(input);
  const [code] = await once(child, 'close');
  return { code, stdout, stderr };
}

/**
 * What a serve on `dialect` needs besides DATABASE_URL: on PostgreSQL an ENCRYPTION_KEY, which
 * it requires; on SQLite nothing, so the key is found or made beside the database as by default.
 */
export function serveKeyEnv(dialect: 'sqlite' | 'postgres'): Record<string, string> {
  return dialect === 'postgres' ? { ENCRYPTION_KEY: randomBytes(32).toString('hex') } : {};
}

export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

export interface Running {
  child: ChildProcessByStdio<null, Readable, null>;
  /** Everything it logged so far. */
  output(): string;
  /** Resolves once it logged a line holding `text`. */
  logged(text: string): Promise<void>;
}

/** Starts a long-running `bin/herald` (serve) and resolves once it logs that it is serving. */
export async function start(args: string[], env: Record<string, string>): Promise<Running> {
  const child = spawn(HERALD, args, {
    env: { ...process.env, ...env, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`herald ${args.join(' ')} exited with ${code} before it logged what was awaited:\n${output}`);
  });
  exited.catch(() => {});
  const logged = async (text: string) => {
    while (!output.includes(text)) await Promise.race([once(child.stdout, 'data'), exited]);
  };
  await logged('herald is serving');
  return { child, output: () => output, logged };
}

export interface OnTerminal {
  /** Everything the terminal showed so far (echo included, had there been any). */
  screen(): string;
  /** Resolves once the terminal shows `text` after what it showed before the call. */
  shows(text: string): Promise<void>;
  /** Types a line, as Enter sends it (a carriage return). */
  type(line: string): void;
  exit: Promise<number | null>;
}

/**
 * Runs `bin/herald` on a pseudo-terminal of its own (util-linux's `script`, in every Debian),
 * so that stdin is a TTY as in an operator's shell and what the terminal echoes is seen.
 */
export function onTerminal(args: string[], env: Record<string, string>): OnTerminal {
  const command = [HERALD, ...args].map((arg) => `'${arg.replaceAll("'", `'\\''`)}'`).join(' ');
  const child = spawn('script', ['--quiet', '--return', '--command', command, '/dev/null'], {
    env: { ...process.env, LOG_LEVEL: 'silent', ...env },
    timeout: 60_000,
  });
  let screen = '';
  child.stdout.on('data', (chunk) => (screen += chunk));
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  const exited = exit.then((code) => {
    throw new Error(
      `herald ${args.join(' ')} exited with ${code} before the terminal showed what was awaited:\n${screen}`,
    );
  });
  exited.catch(() => {});
  return {
    screen: () => screen,
    shows: async (text) => {
      const from = screen.length;
      while (!screen.slice(from).includes(text)) await Promise.race([once(child.stdout, 'data'), exited]);
    },
    type: (line) => child.stdin.write(`${line}\r`),
    exit,
  };
}
