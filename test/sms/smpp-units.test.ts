import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.ts';
import { segment } from '../../src/sms/segments.ts';
import { idReadings, normalisedId } from '../../src/sms/transports/smpp/message-ids.ts';
import { LocalSendRate } from '../../src/ratelimit/send-rate.ts';
import { isReceipt, readReceipt } from '../../src/sms/transports/smpp/receipt-pdu.ts';
import { ReceiptWatch, UNMATCHED_TELL_MS } from '../../src/sms/transports/smpp/receipt-watch.ts';
import { ResendBound, type BoundShare } from '../../src/sms/transports/smpp/resend-bound.ts';
import { parseSmppUrl } from '../../src/sms/transports/smpp/url.ts';
import { refusalOf, statusCode } from '../../src/sms/transports/smpp/statuses.ts';
import { submitFields } from '../../src/sms/transports/smpp/submit-fields.ts';

/** The SMPP transport's pure parts: its settings, ids, receipts, refusals, rate and submit fields. */
describe('SMS_TRANSPORT=smpp://', () => {
  it(
    'takes the defaults: port 2775 (3550 over TLS), 2 binds × a window of 50, no rate cap, a tenth held for ' +
      'passcodes',
    () => {
      assert.deepEqual(parseSmppUrl('smpp://herald:secret@smsc.example.com'), {
        tls: false,
        ca: undefined,
        host: 'smsc.example.com',
        port: 2775,
        systemId: 'herald',
        password: 'secret',
        binds: 2,
        window: 50,
        tps: 0,
        urgentShare: 0.1,
      });
      const tls = parseSmppUrl('smpps://herald:s%40cret@10.0.0.5?binds=4&window=25&tps=300&urgent=0.2');
      assert.deepEqual(
        [tls.tls, tls.port, tls.password, tls.binds, tls.window, tls.tps, tls.urgentShare],
        [true, 3550, 's@cret', 4, 25, 300, 0.2],
      );
      assert.equal(loadConfig({ SMS_TRANSPORT: 'smpp://herald:secret@127.0.0.1:2776' }).smsTransport.kind, 'smpp');
    },
  );

  it('refuses what an SMSC could not take, naming it without the password', () => {
    for (const [url, problem] of [
      ['smpp://127.0.0.1:2775', /system_id/],
      ['smpp://herald:toolongpassword@127.0.0.1', /at most 8/],
      // Octets, not characters: 8 × ä is 16 octets; 15 × é is 30.
      ['smpp://herald:%C3%A4%C3%A4%C3%A4%C3%A4%C3%A4%C3%A4%C3%A4%C3%A4@127.0.0.1', /at most 8 octets/],
      [`smpp://${'%C3%A9'.repeat(15)}:secret@127.0.0.1`, /system_id of 1 to 15 octets/],
      ['smpp://her%00ald:secret@127.0.0.1', /no control characters/],
      ['smpp://herald:sec%00ret@127.0.0.1', /no control characters/],
      ['smpp://herald:secret@127.0.0.1:0', /port from 1 to 65535/],
      ['smpp://herald:secret@smsc%00.example.com', /the SMSC host as a DNS name or an IP address/],
      ['smpp://herald:secret@127.0.0.1/path', /no path or #fragment/],
      ['smpp://herald:secret@127.0.0.1#frag', /no path or #fragment/],
      ['smpp://herald:secret@127.0.0.1?binds=1&binds=2', /names the parameter "binds" twice/],
      ['smpp://herald:secret@127.0.0.1?window=0', /window must be a whole number from 1/],
      ['smpp://herald:secret@127.0.0.1?binds=x', /binds must be/],
      ['smpp://herald:secret@127.0.0.1?urgent=1', /urgent must be a share/],
      ['smpp://herald:secret@127.0.0.1?speed=9', /knows no parameter "speed"/],
      ['smpp://herald:secret@127.0.0.1?ca=/etc/hostname', /ca is for smpps:\/\/ \(SMPP over TLS\) only/],
      ['smpps://herald:secret@127.0.0.1?ca=/nonexistent/ca.pem', /ca: cannot read "\/nonexistent\/ca.pem" \(ENOENT\)/],
      [
        `smpps://herald:secret@127.0.0.1?ca=${encodeURIComponent(fileURLToPath(import.meta.url))}`,
        /holds no PEM certificate/,
      ],
    ] as const) {
      assert.throws(
        () => loadConfig({ SMS_TRANSPORT: url }),
        (error: Error) =>
          problem.test(error.message) &&
          error.message.startsWith('invalid SMS_TRANSPORT') &&
          !error.message.includes('toolongpassword'),
        url,
      );
    }
  });
});

describe('operator message ids', () => {
  it('keeps an id lower case without leading zeros, and reads a receipt id in both notations, as written first', () => {
    assert.equal(normalisedId(' 000001F '), '1f');
    assert.equal(normalisedId('0000'), '0');
    assert.deepEqual(idReadings('0000000031'), ['31', '1f', '49']);
    assert.deepEqual(idReadings('00AB'), ['ab', '171']);
    assert.deepEqual(idReadings('msg-7'), ['msg-7']);
    assert.deepEqual(idReadings('10'), ['10', 'a', '16']);
  });
});

describe('delivery receipts', () => {
  const text = (body: string) => ({ message: body });
  it(
    'reads the id, state and error from the text, the TLVs first ' + 'for the id, the source address as the recipient',
    () => {
      const receipt = readReceipt({
        esm_class: 0x04,
        source_addr: '919812345678',
        short_message: text(
          'id:0000000031 sub:001 dlvrd:000 submit date:2611221200 done date:2611221201 stat:UNDELIV err:001 text:Hello',
        ),
        receipted_message_id: '1F',
        message_state: 5,
      });
      assert.deepEqual(receipt, {
        recipient: '919812345678',
        readings: ['1f', '31', '49'],
        state: 'UNDELIV',
        errorCode: '001',
      });
    },
  );

  it('takes the state from message_state when the text has none, and refuses a receipt that names no id', () => {
    assert.deepEqual(
      readReceipt({ esm_class: 0x04, source_addr: '+4477', receipted_message_id: '9', message_state: 2 }),
      { recipient: '4477', readings: ['9'], state: 'DELIVRD', errorCode: null },
    );
    assert.equal(readReceipt({ esm_class: 0x04, source_addr: '4477', short_message: text('stat:DELIVRD') }), null);
  });

  it('tells receipts and intermediate notifications from messages sent by handsets', () => {
    assert.deepEqual(
      [0x04, 0x20, 0x00, 0x40].map((esm_class) => isReceipt({ esm_class })),
      [true, true, false, false],
    );
  });
});

describe('receipts that match nothing', () => {
  it('are told once they have matched no message for ten minutes, and again when receipts match', () => {
    let now = 0;
    const lines: Array<[string, Record<string, unknown>]> = [];
    const at = (level: string) => (fields: object) => void lines.push([level, fields as Record<string, unknown>]);
    const smsc = 'herald@smsc.example.com:2775';
    const watch = new ReceiptWatch(smsc, { info: at('info'), warn: at('warn'), error: at('error') }, () => now);
    watch.applied(3, 3);
    now += UNMATCHED_TELL_MS - 1;
    watch.applied(2, 1);
    watch.applied(2, 2);
    assert.deepEqual(lines, [], 'one matched: ordinary, and the spell starts again');
    now += UNMATCHED_TELL_MS;
    watch.applied(4, 4);
    watch.applied(1, 1);
    assert.deepEqual(lines, [['error', { smsc, unmatched: 6, minutes: 10 }]], 'told once a spell');
    watch.applied(1, 0);
    assert.deepEqual(lines.slice(1), [['warn', { smsc, unmatched: 7 }]]);
  });
});

describe('submit_sm answers', () => {
  it('slows down on ESME_RTHROTTLED and ESME_RMSGQFUL, tries later on system errors, fails for good otherwise', () => {
    assert.deepEqual([0x58, 0x14, 0x08, 0x64, 0x0b, 0x0a, 0x45].map(refusalOf), [
      'slow down',
      'slow down',
      'for now',
      'for now',
      'for good',
      'for good',
      'for now',
    ]);
    assert.equal(statusCode(0x0b), '0x0000000B');
  });
});

describe('the submit rate', () => {
  it('holds the passcodes’ share: campaigns stop at theirs, passcodes draw on both', () => {
    let now = 0;
    const rate = new LocalSendRate({ tps: 100, urgentShare: 0.2, monotonic: () => now, ready() {} });
    // Buckets hold a tenth of a second: 8 for every send, 2 for passcodes only.
    let normal = 0;
    while (rate.take(false)) normal++;
    assert.equal(normal, 8);
    assert.equal(rate.take(true), true);
    assert.equal(rate.take(true), true);
    assert.equal(rate.take(true), false);
    assert.equal(rate.waitMs(false), 13);
    now += 1000;
    normal = 0;
    while (rate.take(false)) normal++;
    assert.equal(normal, 8, 'a pause is not made up in a burst');
    assert.equal(new LocalSendRate({ tps: 0, urgentShare: 0.1, monotonic: () => now, ready() {} }).take(false), true);
  });

  it('calls ready once a refused submit’s token is due, earlier for a passcode than for a campaign', async () => {
    const started = performance.now();
    let woken: () => void;
    const wake = new Promise<void>((resolve) => (woken = resolve));
    const rate = new LocalSendRate({
      tps: 100,
      urgentShare: 0.99,
      monotonic: () => performance.now(),
      ready: () => woken(),
    });
    // Campaigns 1 a second: their next token in a second; passcodes 99 a second: theirs in milliseconds.
    while (rate.take(false));
    while (rate.take(true));
    await wake;
    const wokenMs = performance.now() - started;
    await rate.close();
    assert.ok(wokenMs < 900, `woken after ${wokenMs} ms, not at the passcode's token`);
  });
});

describe('the resend bound across connections', () => {
  /** A connection of binds × window 10 (8 for campaigns), with `unrecorded` parts and parts waiting if `waits`. */
  const share = (unrecorded: number, waits = false) => {
    const made: BoundShare & { unrecorded: number; waits: boolean; pumped: number } = {
      unrecorded,
      waits,
      pumped: 0,
      slots: (urgent: boolean) => (urgent ? 10 : 8),
      wantsSlots: () => made.waits,
      pump: () => void made.pumped++,
    };
    return made;
  };
  const boundOf = (...shares: BoundShare[]) => {
    const bound = new ResendBound();
    for (const each of shares) bound.join(each);
    return bound;
  };

  it('lets a connection past its own share only while the others have nothing waiting, never past the sum', () => {
    const a = share(8);
    const b = share(0);
    const bound = boundOf(a, b);
    assert.equal(bound.allows(a, false), true, 'b idle: a takes from its share');
    b.waits = true;
    assert.equal(bound.allows(a, false), false, 'b waiting: a keeps to its own 8');
    assert.equal(bound.allows(b, false), true, 'and b has its own');
    b.waits = false;
    a.unrecorded = 16;
    assert.equal(bound.allows(a, false), false, 'the sum of the campaign shares');
    assert.equal(bound.allows(a, true), true, 'a passcode may use what campaigns leave');
    a.unrecorded = 20;
    assert.equal(bound.allows(a, true), false, 'and no more than the sum of binds × window');
    b.waits = true;
    assert.equal(bound.allows(b, true), false, "b's own share waits for a's parts to be recorded");
  });

  it('wakes the other connections when one records or leaves', () => {
    const a = share(0);
    const b = share(0);
    const c = share(0);
    const bound = boundOf(a, b, c);
    bound.released(a);
    assert.deepEqual([a.pumped, b.pumped, c.pumped], [0, 1, 1]);
    bound.leave(c);
    assert.deepEqual([a.pumped, b.pumped, c.pumped], [1, 2, 1]);
    assert.equal(bound.allows(a, false), true);
    a.unrecorded = 16;
    assert.equal(bound.allows(a, false), false, 'c gone: the sum is a and b');
  });
});

describe('submit_sm fields', () => {
  it(
    'sets TON/NPI by the sender kind, the UDH indicator on parts, ' + 'data_coding always, a receipt for every part',
    () => {
      const [first] = segment('日'.repeat(100), { reference: 7 }).parts;
      const fields = submitFields({ sender: 'HERALD', recipient: '919812345678' }, 'UCS-2', first);
      assert.deepEqual(
        [
          fields.source_addr_ton,
          fields.source_addr_npi,
          fields.dest_addr_ton,
          fields.dest_addr_npi,
          fields.esm_class,
          fields.data_coding,
          fields.registered_delivery,
        ],
        [5, 0, 1, 1, 0x40, 8, 1],
      );
      assert.deepEqual((fields.short_message as Buffer).subarray(0, 6), Buffer.from([5, 0, 3, 7, 2, 1]));
      const numeric = submitFields(
        { sender: '+447700900123', recipient: '919812345678' },
        'GSM-7',
        segment('hi', { reference: 0 }).parts[0],
      );
      assert.deepEqual(
        [numeric.source_addr_ton, numeric.source_addr_npi, numeric.source_addr, numeric.esm_class, numeric.data_coding],
        [1, 1, '447700900123', 0, 0],
      );
    },
  );
});
