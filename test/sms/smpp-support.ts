import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../src/clock.ts';
import type { DialectName } from '../../src/db/database.ts';
import { segment } from '../../src/sms/segments.ts';
import type { OutgoingSms } from '../../src/sms/transport.ts';
import { startApiTest } from '../support/client.ts';
import { waitFor } from '../support/wait.ts';
import type { Receiver } from '../webhooks/support.ts';

/** An sms.status event as posted to a webhook. */
export interface StatusEvent {
  queueId: string;
  recipient: string;
  status: string;
  errorCode: string | null;
  parts: number;
}

/** Herald sending over SMPP (`transport`: its SMS_TRANSPORT URL), and what the SMPP tests do through its API. */
export type SmppHerald = Awaited<ReturnType<typeof startSmppHerald>>;

export async function startSmppHerald(dialect: DialectName, transport: string, receiver: Receiver) {
  const api = await startApiTest(dialect, { clock: new ManualClock(Date.now()), env: { SMS_TRANSPORT: transport } });
  const alice = await api.client();
  const read = async (queueId: string) => (await alice.get(`/sms/${queueId}?limit=1000`)).json();
  return {
    api,
    alice,
    /** Posts a send and runs the jobs it queued; its QueueId. */
    async send(path: '/sms/single' | '/sms/batch', body: object) {
      const response = await alice.post(path, body);
      assert.equal(response.statusCode, 202, response.body);
      await api.drain();
      return response.json().data.QueueId as string;
    },
    read,
    /** The send once no recipient is Queued, Submitted or Processed any more: every receipt is in. */
    settled: (queueId: string) =>
      waitFor(`the receipts of ${queueId}`, async () => {
        const view = await read(queueId);
        return view.totals.Submitted === undefined &&
          view.totals.Processed === undefined &&
          view.totals.Queued === undefined
          ? view
          : undefined;
      }),
    /** The sms.status events posted to `receiver` so far, their signatures checked. */
    async events() {
      api.clock.advance(1000);
      await api.drain();
      const secret = (await alice.get('/webhooks/secret')).json().secret as string;
      return receiver.received.flatMap(
        (post) =>
          (new Webhook(secret).verify(post.body, post.headers as Record<string, string>) as { data: StatusEvent[] })
            .data,
      );
    },
  };
}

/** Messages for a transport driven directly, each of its own send and number, made in turn. */
export function outgoingMessages(): (text?: string) => OutgoingSms {
  let sequence = 0;
  return (text = 'hi') => {
    sequence += 1;
    return {
      accountId: 'account',
      sendId: `send-${sequence}`,
      messageId: `message-${sequence}`,
      recipient: String(919812500000 + sequence),
      sender: 'HERALD',
      segmented: segment(text, { reference: sequence % 256 }),
      sensitive: false,
    };
  };
}
