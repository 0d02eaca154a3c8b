/**
 * A bare ESME on the `smpp` package, as the benches drive an SMSC with it: transceiver binds,
 * a window of submit_sm outstanding on each, every receipt answered. What the protocol gives
 * on this machine without Herald (bench/smsc.ts, bench/sms.ts's SMPP run).
 */
import { once } from 'node:events';
import smpp from 'smpp';

export async function bind(port: number) {
  const session = smpp.connect({ host: '127.0.0.1', port });
  await once(session, 'connect');
  await new Promise<void>((resolve, reject) =>
    session.bind_transceiver({ system_id: 'bench', password: 'bench' }, (pdu) =>
      pdu.command_status === 0 ? resolve() : reject(new Error('bind refused')),
    ),
  );
  return session;
}

/**
 * Sends `count` submits on one bind with at most `window` outstanding; resolves when all are
 * answered and, if asked, receipted.
 */
export function drive(session: smpp.Session, count: number, receipts: boolean, window: number): Promise<void> {
  const short_message = Buffer.from('Your code is 123456. Do not share it.');
  return new Promise((resolve) => {
    let sent = 0;
    let answered = 0;
    let receipted = 0;
    const done = () => answered === count && (!receipts || receipted === count) && resolve();
    session.on('deliver_sm', (pdu) => {
      session.send(pdu.response());
      receipted++;
      done();
    });
    const next = () => {
      if (sent === count) return;
      sent++;
      session.submit_sm(
        {
          source_addr: 'HERALD',
          source_addr_ton: 5,
          destination_addr: '447700900123',
          dest_addr_ton: 1,
          dest_addr_npi: 1,
          data_coding: 0,
          registered_delivery: receipts ? 1 : 0,
          short_message,
        },
        () => {
          answered++;
          next();
          done();
        },
      );
    };
    for (let i = 0; i < window; i++) next();
  });
}
