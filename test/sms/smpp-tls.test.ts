import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { ManualClock } from '../../src/clock.ts';
import { startSmsc, type Smsc } from '../../src/sim/smsc.ts';
import { segment } from '../../src/sms/segments.ts';
import { smppTransport } from '../../src/sms/transports/smpp/transport.ts';
import { receiveInboundSms } from '../../src/sms/inbound.ts';
import type { SmsTransport } from '../../src/sms/transport.ts';
import { parseSmppUrl } from '../../src/sms/transports/smpp/url.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import type { ApiTest } from '../support/client.ts';
import { startSmppHerald } from './smpp-support.ts';

/**
 * Throwaway self-signed certificates made for this run (openssl), in a directory removed at
 * the end: no private key is kept. One names the simulator's address; the other names another
 * host, as a certificate presented by the wrong server would.
 */
const dir = mkdtempSync(join(tmpdir(), 'herald-smpps-'));
function selfSigned(name: string, altNames: string): { cert: string; key: string; certPath: string } {
  const certPath = join(dir, `${name}.pem`);
  const keyPath = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyPath,
      '-out',
      certPath,
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
      '-addext',
      `subjectAltName=${altNames}`,
    ],
    { stdio: 'ignore' },
  );
  return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8'), certPath };
}
const local = selfSigned('herald-test-smsc', 'IP:127.0.0.1,DNS:localhost');
const elsewhere = selfSigned('smsc.example.com', 'DNS:smsc.example.com');
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * SMPP over TLS (`smpps://`) to the simulator listening with TLS: the SMSC's certificate verified,
 * by Node's CAs or the one given in `ca=`.
 */
forEachDatabase((dialect) => {
  let smsc: Smsc | undefined;
  afterEach(async () => {
    await smsc?.close();
    smsc = undefined;
  });

  describe('trusted', () => {
    let api: ApiTest | undefined;
    let receiver: Receiver;
    beforeEach(async () => {
      receiver = await startReceiver();
    });
    afterEach(async () => {
      await api?.worker.stop();
      await api?.close();
      await receiver.close();
      api = undefined;
    });

    it('delivers a single over smpps:// to an SMSC whose certificate is trusted through ca=', async () => {
      smsc = await startSmsc({
        tls: { cert: local.cert, key: local.key },
        systemId: 'herald',
        password: 'secret',
        receiptDelayMs: 20,
      });
      const herald = await startSmppHerald(
        dialect,
        `smpps://herald:secret@127.0.0.1:${smsc.port}?ca=${encodeURIComponent(local.certPath)}`,
        receiver,
      );
      api = herald.api;
      const queueId = await herald.send('/sms/single', {
        recipient: '919812345678',
        senderName: 'HERALD',
        body: 'Your code is 482913',
        webHookUrl: receiver.url,
      });
      assert.deepEqual(
        smsc.received().map((m) => [m.recipient, m.text]),
        [['919812345678', 'Your code is 482913']],
      );
      const view = await herald.settled(queueId);
      assert.deepEqual(
        view.recipients.map((r: { status: string }) => r.status),
        ['Delivered'],
      );
      assert.deepEqual(
        (await herald.events()).map((e) => e.status),
        ['Submitted', 'Delivered'],
      );
    });
  });

  describe('refused', () => {
    let database: TestDatabase;
    let transport: SmsTransport | undefined;
    beforeEach(async () => {
      database = await createTestDatabase(dialect);
    });
    afterEach(async () => {
      await transport?.close();
      await database.close();
      transport = undefined;
    });

    for (const [why, served, query, code] of [
      ['a certificate no CA it trusts signed', local, '', 'DEPTH_ZERO_SELF_SIGNED_CERT'],
      [
        'a trusted certificate for another host',
        elsewhere,
        `?ca=${encodeURIComponent(elsewhere.certPath)}`,
        'ERR_TLS_CERT_ALTNAME_INVALID',
      ],
    ] as const) {
      it(`refuses an SMSC presenting ${why}: no bind, no submit, the failed handshake logged`, async () => {
        smsc = await startSmsc({ tls: { cert: served.cert, key: served.key } });
        const errors: Array<{ object: { code?: string }; message: string }> = [];
        const log = {
          info() {},
          warn() {},
          error: (object: object, message: string) => errors.push({ object, message }),
        };
        const clock = new ManualClock(Date.now());
        transport = smppTransport(parseSmppUrl(`smpps://herald:secret@127.0.0.1:${smsc.port}${query}`), {
          database,
          clock,
          metrics: new Registry(),
          receiveInbound: (mo) => receiveInboundSms(database, clock, mo, { defaultSenderName: 'HERALD' }),
          log,
          timing: { reconnectBaseMs: 20, reconnectMaxMs: 50 },
        });
        const stop = new AbortController();
        const message = {
          accountId: 'account',
          sendId: 'send',
          messageId: 'message',
          recipient: '919812345678',
          sender: 'HERALD',
          segmented: segment('not sent', { reference: 1 }),
          sensitive: false,
        };
        const result = transport.submit([message], stop.signal);
        // Both binds tried, and tried again.
        await waitFor('failed handshakes', async () => (errors.length >= 4 ? true : undefined));
        assert.equal(errors[0].object.code, code);
        assert.match(errors[0].message, /TLS: the handshake with the SMSC failed.*ca=/);
        assert.deepEqual([smsc.stats().binds.accepted, smsc.stats().submits.received], [0, 0]);
        stop.abort();
        assert.equal((await result)[0].accepted, false);
        assert.equal(smsc.stats().submits.received, 0);
      });
    }
  });
});
