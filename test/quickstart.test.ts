import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { freePort, start } from './cli/support.ts';

/**
 * The README's quick start, run as a reader pastes it: its marked shell blocks, in order, in one
 * bash against a `herald serve` started on a fresh SQLite database with the sandbox transports,
 * the account made by the CLI as the README makes it.
 */

const ROOT = new URL('..', import.meta.url).pathname;
/** Where the README's commands find the server; the test's server listens on a free port instead. */
const README_URL = 'http://127.0.0.1:8080';

/** Each ```sh block that follows a `<!-- quickstart -->` line, in order. */
function quickstartBlocks(readme: string): string[] {
  return [...readme.matchAll(/^<!-- quickstart -->\n```sh\n([\s\S]*?)^```$/gm)].map(([, block]) => block);
}

/** Sourced before the blocks: stops at the first failure, and logs each curl's answer to $CALLS. */
const LOGGED_CURL = join(ROOT, 'test/support/logged-curl.sh');

/** What the README says each request answers, by method and path. */
const ANSWERS: Array<{ call: RegExp; status: number }> = [
  { call: /^POST \/token$/, status: 200 },
  { call: /^POST \/sms\/single$/, status: 202 },
  { call: /^GET \/sms\/[0-9a-f-]{36}$/, status: 200 },
  { call: /^GET \/sandbox\/sms\?recipient=919812345678$/, status: 200 },
  { call: /^POST \/email\/batch$/, status: 202 },
  { call: /^GET \/email\/batch\/[0-9a-f-]{36}$/, status: 200 },
  { call: /^GET \/sandbox\/email\?to=ada@example\.com$/, status: 200 },
];

/** Lines the blocks print, each written in the README as the comment `# <line>` under its command. */
const PRINTED = ['Your code is 482913', 'Subject: Hello Ada'];

it("runs the README's quick start against a started server", { timeout: 90_000 }, async () => {
  const readme = await readFile(join(ROOT, 'README.md'), 'utf8');
  const blocks = quickstartBlocks(readme);
  assert.ok(blocks.length >= 4, 'the README marks its quick start blocks with <!-- quickstart -->');
  for (const line of PRINTED) {
    assert.ok(
      blocks.some((block) => block.includes(`# ${line}\n`)),
      `the README shows "${line}"`,
    );
  }

  const dir = await mkdtemp(join(tmpdir(), 'herald-quickstart-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = {
    DATABASE_URL: `sqlite:${join(dir, 'herald.db')}`,
    HOST: '127.0.0.1',
    PORT: String(port),
    SMS_TRANSPORT: 'sandbox:',
    EMAIL_TRANSPORT: 'sandbox:',
  };
  const server = await start(['serve'], env);
  try {
    const calls = join(dir, 'calls.log');
    const script = [`source '${LOGGED_CURL}'`, ...blocks].join('\n').replaceAll(README_URL, url);
    const bashEnv = { ...process.env, ...env, LOG_LEVEL: 'silent', CALLS: calls };
    const bash = spawn('bash', ['-c', script], { cwd: ROOT, env: bashEnv, timeout: 60_000 });
    let stdout = '';
    let stderr = '';
    bash.stdout.on('data', (chunk) => (stdout += chunk));
    bash.stderr.on('data', (chunk) => (stderr += chunk));
    const [code] = await once(bash, 'close');
    assert.equal(code, 0, `the quick start stopped:\n${stderr}\n${stdout}`);

    const made = (await readFile(calls, 'utf8'))
      .trim()
      .split('\n')
      .map((line) => {
        const [status, method, target] = line.split(' ');
        return { status: Number(status), call: `${method} ${target.slice(url.length)}` };
      });
    for (const { call, status } of made) {
      const answer = ANSWERS.find((expected) => expected.call.test(call));
      assert.ok(answer, `the README's quick start made a request the test does not know: ${call}`);
      assert.equal(status, answer.status, call);
    }
    for (const { call } of ANSWERS) {
      assert.ok(
        made.some((request) => call.test(request.call)),
        `the quick start made ${call}`,
      );
    }
    // Raw MIME ends its lines with CRLF: a terminal shows them as the README does.
    const printed = stdout.split('\n').map((line) => line.trimEnd());
    for (const line of PRINTED) assert.ok(printed.includes(line), `printed ${line}:\n${stdout}`);
  } finally {
    if (server.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await once(server.child, 'exit');
    }
    await rm(dir, { recursive: true, force: true });
  }
});
