import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { startSmsc, type Smsc, type SmscOptions } from '../../src/sim/smsc.ts';
import { segment } from '../../src/sms/segments.ts';
import { CREDENTIALS, errors, TestEsme, textOf } from './client.ts';

const RECIPIENT = '447700900123';
const SUBMIT = {
  source_addr_ton: 5,
  source_addr_npi: 0,
  source_addr: 'HERALD',
  dest_addr_ton: 1,
  dest_addr_npi: 1,
  destination_addr: RECIPIENT,
  short_message: 'Your code is 123456',
};
const RECEIPT_TEXT =
  /^id:(\w+) sub:001 dlvrd:(\d{3}) submit date:\d{10} done date:\d{10} stat:([A-Z]{7}) err:(\d{3}) text:(.*)$/;

let smsc: Smsc | undefined;
const esmes: TestEsme[] = [];

async function start(options: SmscOptions = {}): Promise<Smsc> {
  smsc = await startSmsc({
    systemId: CREDENTIALS.system_id,
    password: CREDENTIALS.password,
    receiptDelayMs: 0,
    ...options,
  });
  return smsc;
}

async function bound(kind?: 'transceiver' | 'transmitter' | 'receiver'): Promise<TestEsme> {
  const esme = await TestEsme.bound(smsc!.port, kind);
  esmes.push(esme);
  return esme;
}

async function control(method: string, path: string, body?: unknown) {
  const response = await fetch(`http://127.0.0.1:${smsc!.httpPort}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: response.status === 204 ? undefined : await response.json() };
}

afterEach(async () => {
  await Promise.all(esmes.splice(0).map((esme) => esme.close()));
  await smsc?.close();
  smsc = undefined;
});

describe('binds', () => {
  it('refuses a wrong password and a wrong system_id, and accepts the configured pair', async () => {
    await start();
    const esme = await TestEsme.connect(smsc!.port);
    esmes.push(esme);
    const wrongPassword = await esme.bind('transceiver', { system_id: CREDENTIALS.system_id, password: 'guess' });
    assert.equal(wrongPassword.command_status, errors.ESME_RINVPASWD);
    const wrongSystem = await esme.bind('transceiver', { system_id: 'someone', password: CREDENTIALS.password });
    assert.equal(wrongSystem.command_status, errors.ESME_RINVSYSID);
    const refusedSubmit = await esme.submit(SUBMIT);
    assert.equal(refusedSubmit.command_status, errors.ESME_RINVBNDSTS, 'no submit before a bind');

    const right = await esme.bind('transceiver', CREDENTIALS);
    assert.equal(right.command_status, 0);
    assert.equal(right.system_id, 'HERALDSIM');
    assert.equal((await esme.bind('transceiver', CREDENTIALS)).command_status, errors.ESME_RALYBND);
    assert.deepEqual(smsc!.stats().binds, { accepted: 1, refused: 2, open: 1 });
  });

  it('answers enquire_link', async () => {
    await start();
    const esme = await bound();
    const response = await esme.enquireLink();
    assert.equal(response.command, 'enquire_link_resp');
    assert.equal(response.command_status, 0);
    assert.equal(smsc!.stats().enquireLinks, 1);
  });

  it('refuses submit_sm on a receiver bind', async () => {
    await start();
    const receiver = await bound('receiver');
    assert.equal((await receiver.submit(SUBMIT)).command_status, errors.ESME_RINVBNDSTS);
  });
});

describe('submits and receipts', () => {
  it('answers with a fresh decimal id and sends a DELIVRD receipt carrying it', async () => {
    await start({ firstId: 41, idWidth: 6 });
    const esme = await bound();
    const first = await esme.submit({ ...SUBMIT, registered_delivery: 1 });
    const second = await esme.submit({ ...SUBMIT, registered_delivery: 1 });
    assert.equal(first.command_status, 0);
    assert.equal(first.message_id, '000041');
    assert.equal(second.message_id, '000042');

    const receipt = await esme.nextDelivery();
    assert.equal(receipt.esm_class, 0x04);
    assert.equal(receipt.receipted_message_id, '000041');
    assert.equal(receipt.message_state, 2);
    assert.equal(receipt.source_addr, RECIPIENT, 'a receipt comes from the recipient');
    assert.equal(receipt.destination_addr, 'HERALD');
    const [, id, delivered, stat, error, text] = RECEIPT_TEXT.exec(textOf(receipt))!;
    assert.deepEqual(
      { id, delivered, stat, error, text },
      { id: '000041', delivered: '001', stat: 'DELIVRD', error: '000', text: 'Your code is 123456' },
    );
    assert.equal((await esme.nextDelivery()).receipted_message_id, '000042');
  });

  it('writes ids in hex, and can write the receipt text in another notation than the response', async () => {
    await start({ idFormat: 'hex', receiptIdFormat: 'decimal', firstId: 0xfe });
    const esme = await bound();
    const response = await esme.submit({ ...SUBMIT, registered_delivery: 1 });
    assert.equal(response.message_id, 'fe');
    const receipt = await esme.nextDelivery();
    assert.equal(receipt.receipted_message_id, 'fe');
    assert.equal(RECEIPT_TEXT.exec(textOf(receipt))![1], '254');
  });

  it('chooses outcomes by their shares and sends no receipt unless asked', async () => {
    const draws = [0.1, 0.5, 0.9];
    await start({ outcomes: { UNDELIV: 0.3, EXPIRED: 0.3 }, random: () => draws.shift()! });
    const esme = await bound();
    await esme.submit({ ...SUBMIT, registered_delivery: 1 });
    await esme.submit({ ...SUBMIT, registered_delivery: 1 });
    await esme.submit({ ...SUBMIT, registered_delivery: 0 });
    const states = [
      RECEIPT_TEXT.exec(textOf(await esme.nextDelivery()))![3],
      RECEIPT_TEXT.exec(textOf(await esme.nextDelivery()))![3],
    ];
    assert.deepEqual(states, ['UNDELIV', 'EXPIRED']);
    assert.deepEqual(
      smsc!.received().map((message) => message.parts[0].outcome),
      ['UNDELIV', 'EXPIRED', 'DELIVRD'],
    );
    assert.equal(smsc!.stats().deliverSm.receipts, 2);
  });

  it('sends ENROUTE as an intermediate notification before the final receipt', async () => {
    await start({ enroute: true });
    const esme = await bound();
    const response = await esme.submit({ ...SUBMIT, registered_delivery: 1 });
    const enroute = await esme.nextDelivery();
    assert.equal(enroute.esm_class, 0x20);
    assert.equal(enroute.message_state, 1);
    assert.equal(enroute.receipted_message_id, response.message_id);
    assert.match(textOf(enroute), / stat:ENROUTE /);
    assert.match(textOf(await esme.nextDelivery()), / stat:DELIVRD /);
  });

  it('sends the receipt before the submit_sm_resp when asked to', async () => {
    await start({ receiptBeforeResponse: true });
    const esme = await bound();
    const response = await esme.submit({ ...SUBMIT, registered_delivery: 1 });
    const receipt = await esme.nextDelivery();
    assert.equal(receipt.receipted_message_id, response.message_id);
    assert.deepEqual(esme.arrivals, ['bind_transceiver_resp', 'deliver_sm', 'submit_sm_resp']);
  });

  it('holds receipts until a bind can receive them', async () => {
    await start();
    const transmitter = await bound('transmitter');
    const response = await transmitter.submit({ ...SUBMIT, registered_delivery: 1 });
    assert.equal(response.command_status, 0);
    const receiver = await bound('receiver');
    assert.equal((await receiver.nextDelivery()).receipted_message_id, response.message_id);
  });

  it('offers a receipt again on another bind when its bind closes before answering it', async () => {
    await start();
    const silent = await TestEsme.connect(smsc!.port, { acknowledge: false });
    assert.equal((await silent.bind('transceiver', CREDENTIALS)).command_status, 0);
    const response = await silent.submit({ ...SUBMIT, registered_delivery: 1 });
    await silent.nextDelivery();
    await silent.close();
    const next = await bound('receiver');
    assert.equal((await next.nextDelivery()).receipted_message_id, response.message_id);
  });
});

describe('refusals', () => {
  it('answers ESME_RTHROTTLED above the TPS of a bind, and takes more as time passes', async () => {
    let now = 1_000_000;
    await start({ tps: 3, now: () => now });
    const esme = await bound();
    const statuses = await Promise.all(
      Array.from({ length: 5 }, () => esme.submit(SUBMIT).then((pdu) => pdu.command_status)),
    );
    assert.deepEqual(statuses, [0, 0, 0, errors.ESME_RTHROTTLED, errors.ESME_RTHROTTLED]);
    now += 1000;
    assert.equal((await esme.submit(SUBMIT)).command_status, 0);
    const other = await bound();
    assert.equal((await other.submit(SUBMIT)).command_status, 0, 'the limit is per bind');
    assert.equal(smsc!.stats().submits.throttled, 2);
  });

  it('answers a share of submits ESME_RTHROTTLED or ESME_RMSGQFUL, and refuses numbers by pattern', async () => {
    // Each submit draws for the throttled share, then the full queue; an accepted one then draws its outcome.
    const draws = [0.05, 0.9, 0.9, 0.5, 0.9, 0.05, 0.9, 0.9];
    await start({
      throttledShare: 0.1,
      queueFullShare: 0.1,
      rejectDestinations: /^4479/,
      random: () => draws.shift()!,
    });
    const esme = await bound();
    const statuses = [];
    for (const destination_addr of [RECIPIENT, RECIPIENT, RECIPIENT, '447912345678']) {
      statuses.push((await esme.submit({ ...SUBMIT, destination_addr })).command_status);
    }
    assert.deepEqual(statuses, [errors.ESME_RTHROTTLED, 0, errors.ESME_RMSGQFUL, errors.ESME_RINVDSTADR]);
    assert.equal(smsc!.received().length, 1, 'only accepted submits are kept');
  });

  it('closes the connection after answering its Nth submit', async () => {
    await start({ dropAfterSubmits: 2 });
    const esme = await bound();
    let thirdAnswered = false;
    const answers = [esme.submit(SUBMIT), esme.submit(SUBMIT)];
    void esme.submit(SUBMIT).then(() => (thirdAnswered = true));
    assert.deepEqual(
      (await Promise.all(answers)).map((pdu) => pdu.command_status),
      [0, 0],
    );
    await esme.closed;
    assert.equal(thirdAnswered, false);
    assert.equal(smsc!.stats().drops, 1);
    const again = await bound();
    assert.equal((await again.submit(SUBMIT)).command_status, 0, 'a new connection starts its own count');
  });
});

describe('what it took', () => {
  it('reassembles a two-part UDH message in GET /messages', async () => {
    await start();
    const esme = await bound();
    const text = `${'Long message. '.repeat(12)}The end €`;
    const { parts } = segment(text, { reference: 42 });
    assert.equal(parts.length, 2);
    for (const part of [...parts].reverse()) {
      await esme.submit({ ...SUBMIT, esm_class: 0x40, short_message: Buffer.from(part.shortMessage) });
    }
    await esme.submit({ ...SUBMIT, destination_addr: '447700900999', short_message: 'someone else' });

    const { status, body } = await control('GET', `/messages?recipient=${RECIPIENT}`);
    assert.equal(status, 200);
    assert.equal(body.messages.length, 1);
    const [message] = body.messages;
    assert.equal(message.text, text);
    assert.equal(message.complete, true);
    assert.deepEqual(
      message.parts.map((part: { concatenation: unknown }) => part.concatenation),
      [
        { reference: 42, total: 2, sequence: 1 },
        { reference: 42, total: 2, sequence: 2 },
      ],
    );
    assert.equal(message.parts[0].udh, '0500032a0201');
    assert.deepEqual(message.destination, { ton: 1, npi: 1, addr: RECIPIENT });
    assert.deepEqual(message.source, { ton: 5, npi: 0, addr: 'HERALD' });
    assert.equal((await control('GET', '/messages')).body.messages.length, 2);

    const { body: timed } = await control('GET', '/arrivals');
    assert.deepEqual(
      timed.arrivals.map(([recipient]: [string, number]) => recipient),
      [RECIPIENT, '447700900999'],
      'each recipient once, by the first of its parts to arrive',
    );
    const [[, first], [, second]] = timed.arrivals as Array<[string, number]>;
    assert.equal(
      first,
      Math.min(...message.parts.map((part: { receivedAt: string }) => Date.parse(part.receivedAt))),
      'the earliest of its parts (sent last to first here)',
    );
    assert.ok(second >= first);
  });

  it('decodes packed GSM-7 and UCS-2, and shows a message missing a part as incomplete', async () => {
    await start({ gsm7Packed: true });
    const esme = await bound();
    const packed = segment(`${'abcdefg'.repeat(30)}@`, { reference: 7, packed: true });
    for (const part of packed.parts)
      await esme.submit({ ...SUBMIT, esm_class: 0x40, short_message: Buffer.from(part.shortMessage) });
    const ucs2 = segment('Привет, это длинное сообщение, которое займёт больше одной части SMS, честно 😀', {
      reference: 8,
    });
    await esme.submit({
      ...SUBMIT,
      esm_class: 0x40,
      data_coding: 8,
      short_message: Buffer.from(ucs2.parts[1].shortMessage),
    });

    const [gsm, russian] = smsc!.received(RECIPIENT);
    assert.equal(gsm.text, `${'abcdefg'.repeat(30)}@`);
    assert.equal(gsm.complete, true);
    assert.equal(russian.complete, false);
    assert.equal(russian.text, ucs2.parts[1].text);
  });

  it('reads a message_payload TLV and SAR concatenation', async () => {
    await start();
    const esme = await bound();
    await esme.submit({
      ...SUBMIT,
      short_message: Buffer.alloc(0),
      message_payload: Buffer.from('first half, '),
      sar_msg_ref_num: 300,
      sar_total_segments: 2,
      sar_segment_seqnum: 1,
    });
    await esme.submit({
      ...SUBMIT,
      short_message: Buffer.alloc(0),
      message_payload: Buffer.from('second half'),
      sar_msg_ref_num: 300,
      sar_total_segments: 2,
      sar_segment_seqnum: 2,
    });
    const [message] = smsc!.received();
    assert.equal(message.text, 'first half, second half');
    assert.equal(message.complete, true);
  });

  it('reports counters on GET /stats and forgets on POST /reset', async () => {
    await start();
    const esme = await bound();
    await esme.submit(SUBMIT);
    assert.equal((await control('GET', '/stats')).body.submits.accepted, 1);
    assert.equal((await control('POST', '/reset')).status, 204);
    assert.equal((await control('GET', '/stats')).body.submits.accepted, 0);
    assert.deepEqual((await control('GET', '/messages')).body, { messages: [] });
    assert.equal((await control('GET', '/nothing')).status, 404);
  });
});

describe('MO messages', () => {
  it('delivers a POST /mo to a bound receiver as a deliver_sm that is not a receipt', async () => {
    await start();
    assert.equal(
      (await control('POST', '/mo', { from: RECIPIENT, to: '12345', text: 'STOP' })).status,
      409,
      'no receiver yet',
    );
    const receiver = await bound('receiver');
    const { status } = await control('POST', '/mo', { from: RECIPIENT, to: '12345', text: 'STOP' });
    assert.equal(status, 202);
    const mo = await receiver.nextDelivery();
    assert.equal(mo.esm_class, 0);
    assert.equal(mo.data_coding, 0);
    assert.equal(textOf(mo), 'STOP');
    assert.equal(mo.source_addr, RECIPIENT);
    assert.equal(mo.source_addr_ton, 1);
    assert.equal(mo.destination_addr, '12345');
    assert.equal(smsc!.stats().deliverSm.mo, 1);
  });

  it('sends a long MO in concatenated parts and refuses a body without text', async () => {
    await start();
    const receiver = await bound('receiver');
    const text = 'Ответ '.repeat(20);
    assert.equal((await control('POST', '/mo', { from: RECIPIENT, to: '12345', text })).status, 202);
    const parts = [await receiver.nextDelivery(), await receiver.nextDelivery()];
    assert.deepEqual(
      parts.map((part) => [part.esm_class, part.data_coding]),
      [
        [0x40, 8],
        [0x40, 8],
      ],
    );
    assert.equal(parts.map(textOf).join(''), text);
    assert.equal((await control('POST', '/mo', { from: RECIPIENT, to: '12345' })).status, 400);
  });
});
