/** An ESME for the simulator's tests: the `smpp` package's session behind promises. */
import { once } from 'node:events';
import smpp from 'smpp';

type Pdu = InstanceType<typeof smpp.PDU>;
type Session = InstanceType<typeof smpp.Session>;

export const { errors } = smpp;

export class TestEsme {
  readonly session: Session;
  /** Commands of every PDU received, in arrival order. */
  readonly arrivals: string[] = [];
  readonly closed: Promise<unknown>;
  private readonly delivered: Pdu[] = [];
  private readonly waiting: Array<(pdu: Pdu) => void> = [];

  constructor(session: Session, { acknowledge = true } = {}) {
    this.session = session;
    this.closed = once(session, 'close');
    session.on('error', () => {});
    session.on('pdu', (pdu: Pdu) => this.arrivals.push(pdu.command));
    session.on('deliver_sm', (pdu: Pdu) => {
      if (acknowledge) session.send(pdu.response());
      const waiter = this.waiting.shift();
      if (waiter) waiter(pdu);
      else this.delivered.push(pdu);
    });
  }

  static async connect(port: number, options: { acknowledge?: boolean } = {}): Promise<TestEsme> {
    const session = smpp.connect({ host: '127.0.0.1', port });
    await once(session, 'connect');
    return new TestEsme(session, options);
  }

  static async bound(
    port: number,
    kind: 'transceiver' | 'transmitter' | 'receiver' = 'transceiver',
    credentials = CREDENTIALS,
  ): Promise<TestEsme> {
    const esme = await TestEsme.connect(port);
    const response = await esme.bind(kind, credentials);
    if (response.command_status !== 0) throw new Error(`bind refused with status ${response.command_status}`);
    return esme;
  }

  bind(
    kind: 'transceiver' | 'transmitter' | 'receiver',
    credentials: { system_id: string; password: string },
  ): Promise<Pdu> {
    return new Promise((resolve) => this.session[`bind_${kind}`](credentials, resolve));
  }

  submit(fields: Record<string, unknown>): Promise<Pdu> {
    return new Promise((resolve) => this.session.submit_sm({ data_coding: 0, ...fields }, resolve));
  }

  enquireLink(): Promise<Pdu> {
    return new Promise((resolve) => this.session.enquire_link(resolve));
  }

  /** The next deliver_sm, whether it came already or is still to come. */
  nextDelivery(): Promise<Pdu> {
    const pdu = this.delivered.shift();
    if (pdu) return Promise.resolve(pdu);
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  async close(): Promise<void> {
    this.session.destroy();
    await this.closed;
  }
}

export const CREDENTIALS = { system_id: 'herald', password: 'secret' };

/** The text of a deliver_sm as the package decodes it by its data_coding. */
export function textOf(pdu: Pdu): string {
  const message = pdu.short_message?.message;
  return typeof message === 'string' ? message : String(message);
}
