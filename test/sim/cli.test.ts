import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { it } from 'node:test';
import { TestEsme } from './client.ts';

const HERALD = new URL('../../bin/herald', import.meta.url).pathname;

it('herald sim smsc serves SMPP and its control port until SIGTERM', async () => {
  const child = spawn(HERALD, [
    'sim',
    'smsc',
    '--port',
    '0',
    '--http-port',
    '0',
    '--system-id',
    'herald',
    '--password',
    'secret',
    '--id-format',
    'hex',
    '--first-id',
    '255',
  ]);
  const exited = once(child, 'exit');
  try {
    const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
    const [, port, httpPort] = /SMPP on 127\.0\.0\.1:(\d+), control on http:\/\/127\.0\.0\.1:(\d+)/.exec(line)!;
    const esme = await TestEsme.bound(Number(port));
    assert.equal((await esme.submit({ destination_addr: '447700900123', short_message: 'hi' })).message_id, 'ff');
    await esme.close();
    const stats = await (await fetch(`http://127.0.0.1:${httpPort}/stats`)).json();
    assert.equal(stats.submits.accepted, 1);
  } finally {
    child.kill('SIGTERM');
  }
  const [code] = await exited;
  assert.equal(code, 0);
});
