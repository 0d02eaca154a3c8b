import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { it } from 'node:test';
import { PasswordInputError, readNewPassword, type PasswordIo } from '../../src/cli/password-input.ts';

/** The CLI prints a PasswordInputError as one line: the class matters as much as the words. */
const refusal = (message: RegExp) => (error: unknown) =>
  error instanceof PasswordInputError && message.test(error.message);

/** A stdin of `input`, a terminal or not, and a prompt that answers from `answers` and records what it asked. */
function io(options: { input?: string; tty: boolean; answers?: string[] }): PasswordIo & { asked: string[] } {
  const stdin = Object.assign(Readable.from([Buffer.from(options.input ?? '')]), { isTTY: options.tty });
  const answers = [...(options.answers ?? [])];
  const asked: string[] = [];
  return {
    stdin,
    asked,
    ask: async (prompt) => {
      asked.push(prompt);
      const answer = answers.shift();
      if (answer === undefined) throw new Error(`asked more than expected: ${prompt}`);
      return answer;
    },
  };
}

it('reads all of stdin with --password-stdin and removes one trailing newline only', async () => {
  assert.equal(
    await readNewPassword({ passwordStdin: true }, io({ input: 'correct horse battery staple\n', tty: false })),
    'correct horse battery staple',
  );
  assert.equal(
    await readNewPassword({ passwordStdin: true }, io({ input: 'correct horse\r\n', tty: false })),
    'correct horse',
  );
  assert.equal(
    await readNewPassword({ passwordStdin: true }, io({ input: 'two lines\nof it\n\n', tty: false })),
    'two lines\nof it\n',
  );
  assert.equal(
    await readNewPassword({ passwordStdin: true }, io({ input: ' spaces kept ', tty: false })),
    ' spaces kept ',
  );
});

it('takes --password as given, without reading stdin or asking', async () => {
  const terminal = io({ tty: true });
  assert.equal(
    await readNewPassword({ password: 'correct horse battery staple' }, terminal),
    'correct horse battery staple',
  );
  assert.deepEqual(terminal.asked, []);
});

it('refuses --password together with --password-stdin', async () => {
  await assert.rejects(
    readNewPassword(
      { password: 'correct horse battery staple', passwordStdin: true },
      io({ input: 'other\n', tty: false }),
    ),
    refusal(/^give either --password or --password-stdin, not both$/),
  );
});

it('asks twice on a terminal when no option gives the password, and takes it when both agree', async () => {
  const terminal = io({ tty: true, answers: ['correct horse battery staple', 'correct horse battery staple'] });
  assert.equal(await readNewPassword({}, terminal), 'correct horse battery staple');
  assert.deepEqual(terminal.asked, ['Password:', 'Password again:']);
});

it('refuses two differing answers on the terminal', async () => {
  await assert.rejects(
    readNewPassword({}, io({ tty: true, answers: ['correct horse battery staple', 'correct horse battery stapel'] })),
    refusal(/^the two passwords differ; nothing was changed$/),
  );
});

it('refuses, without asking, when no option gives the password and stdin is not a terminal', async () => {
  const piped = io({ input: 'correct horse battery staple\n', tty: false });
  await assert.rejects(readNewPassword({}, piped), refusal(/^no password given: pipe it in with --password-stdin/));
  assert.deepEqual(piped.asked, []);
});
