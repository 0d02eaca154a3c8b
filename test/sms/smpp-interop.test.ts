import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { startSmppHerald, type SmppHerald } from './smpp-support.ts';

/**
 * Interoperability: Herald against an SMSC it did not write, Net::SMPP's server side (Debian's
 * libnet-smpp-perl, which .ci/run installs) run as test/support/net-smpp-smsc.pl. It binds,
 * sends a two-part message and takes Net::SMPP's receipts, read from the Appendix B text alone.
 */
interface Record {
  pdu: 'bind_transceiver' | 'submit_sm' | 'deliver_sm_resp';
  [field: string]: unknown;
}

interface NetSmppSmsc {
  port: number;
  /** What the SMSC received, in order: binds, submits and the answers to its receipts. */
  records(pdu: Record['pdu']): Record[];
  close(): Promise<void>;
}

const SCRIPT = fileURLToPath(new URL('../support/net-smpp-smsc.pl', import.meta.url));

async function startNetSmppSmsc(systemId: string, password: string): Promise<NetSmppSmsc> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-net-smpp-'));
  const recordPath = join(dir, 'records.jsonl');
  const child = spawn('perl', [SCRIPT, '0', recordPath, systemId, password], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = once(child, 'exit');
  const port = await Promise.race([
    once(createInterface({ input: child.stdout }), 'line').then(([line]) => Number(line)),
    exited.then(([code]) => {
      if (/Can't locate Net\/SMPP\.pm/.test(stderr))
        throw new Error(
          "Perl's Net::SMPP is missing: install Debian's libnet-smpp-perl (apt-get install libnet-smpp-perl; " +
            '.ci/run does)',
        );
      throw new Error(`the Net::SMPP SMSC exited (${code}) before listening: ${stderr}`);
    }),
  ]);
  return {
    port,
    records: (pdu) =>
      readFileSync(recordPath, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as Record)
        .filter((record) => record.pdu === pdu),
    async close() {
      if (child.exitCode === null) {
        child.kill();
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

forEachDatabase((dialect) => {
  let smsc: NetSmppSmsc | undefined;
  let receiver: Receiver | undefined;
  let herald: SmppHerald | undefined;
  before(async () => {
    smsc = await startNetSmppSmsc('herald', 'secret');
    receiver = await startReceiver();
    // Net::SMPP serves one connection at a time: one bind.
    herald = await startSmppHerald(dialect, `smpp://herald:secret@127.0.0.1:${smsc.port}?binds=1`, receiver);
  });
  after(async () => {
    await herald?.api.worker.stop();
    await herald?.api.close();
    await receiver?.close();
    await smsc?.close();
  });

  it('binds as a transceiver with SMPP 3.4', async () => {
    const binds = await waitFor('the bind', async () => {
      const taken = smsc!.records('bind_transceiver');
      return taken.length > 0 ? taken : undefined;
    });
    assert.deepEqual(binds, [
      { pdu: 'bind_transceiver', system_id: 'herald', interface_version: 0x34, accepted: true },
    ]);
    await waitFor('Herald bound', async () => {
      const metrics = (await herald!.api.t.app.inject({ method: 'GET', url: '/metrics' })).body;
      return /herald_smpp_binds\{smsc="default",state="bound"\} 1\b/.test(metrics) ? true : undefined;
    });
  });

  it(
    'sends 161 GSM-7 characters as two concatenated submit_sm, ' + 'Delivered by Net::SMPP’s receipts and posted',
    async () => {
      // Characters whose GSM-7 septets are their ASCII codes: the octets read back as ASCII
      // without Herald's own GSM-7 table.
      const body =
        'Your parcel 7741 is at the depot. Collect it by Friday 18:00 with this code: 55120. Reply STOP to ' +
        'opt out of these messages. Thank you for shopping with us! Bye!';
      assert.equal(body.length, 161);
      const recipient = '919812300461';
      const queueId = await herald!.send('/sms/single', {
        recipient,
        senderName: 'HERALD',
        body,
        webHookUrl: receiver!.url,
      });

      const submits = await waitFor('both parts at the SMSC', async () => {
        const taken = smsc!.records('submit_sm');
        return taken.length === 2 ? taken : undefined;
      });
      for (const submit of submits) {
        assert.deepEqual(
          [
            submit.source_addr,
            submit.source_addr_ton,
            submit.source_addr_npi,
            submit.destination_addr,
            submit.dest_addr_ton,
            submit.dest_addr_npi,
          ],
          ['HERALD', 5, 0, recipient, 1, 1],
        );
        assert.deepEqual([submit.esm_class, submit.data_coding, submit.registered_delivery], [0x40, 0, 1]);
      }
      const parts = submits.map((submit) => {
        const octets = Buffer.from(submit.short_message as string, 'hex');
        // UDH: its length 5, then IEI 0x00 (concatenation, 8-bit reference), 3 octets: reference, total, sequence.
        assert.deepEqual([...octets.subarray(0, 3)], [5, 0x00, 3]);
        return {
          reference: octets[3],
          total: octets[4],
          sequence: octets[5],
          text: octets.subarray(6).toString('latin1'),
          messageId: submit.message_id as string,
        };
      });
      assert.equal(parts[0].reference, parts[1].reference);
      assert.deepEqual(parts.map((p) => [p.total, p.sequence]).sort(), [
        [2, 1],
        [2, 2],
      ]);
      const inOrder = parts.sort((a, b) => a.sequence - b.sequence);
      assert.equal(inOrder.map((p) => p.text).join(''), body);

      const view = await herald!.settled(queueId);
      const [delivered] = view.recipients;
      assert.equal(delivered.status, 'Delivered');
      assert.deepEqual(
        delivered.history.map((h: { status: string }) => h.status),
        ['Queued', 'Submitted', 'Delivered'],
      );
      // Each part under the id Net::SMPP answered it with, kept lower case as every id is.
      assert.deepEqual(
        delivered.partStatus,
        inOrder.map((p) => ({ part: p.sequence, operatorMessageId: p.messageId.toLowerCase(), status: 'Delivered' })),
      );
      // Each receipt answered once kept, which may be just after its status shows.
      const answers = await waitFor('both receipts answered', async () => {
        const taken = smsc!.records('deliver_sm_resp');
        return taken.length === 2 ? taken : undefined;
      });
      assert.deepEqual(answers, [
        { pdu: 'deliver_sm_resp', status: 0 },
        { pdu: 'deliver_sm_resp', status: 0 },
      ]);
      assert.deepEqual(
        (await herald!.events()).map((e) => [e.queueId, e.recipient, e.status, e.parts]),
        [
          [queueId, recipient, 'Submitted', 2],
          [queueId, recipient, 'Delivered', 2],
        ],
      );
    },
  );
});
