import assert from 'node:assert/strict';
import { simpleParser, type ParsedMail } from 'mailparser';
import type { ApiClient, ApiTest } from '../support/client.ts';

export interface SandboxEmail {
  batchId: string;
  messageId: string;
  to: string;
  raw: string;
  at: string;
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export const base64 = (html: string) => Buffer.from(html, 'utf8').toString('base64');

/** A valid batch: the service's sender domain, a subject, a Base64 body; `details` and `rest` replace or add fields. */
export function buildBatch(details: Record<string, unknown> = {}, rest: Record<string, unknown> = {}) {
  return {
    sendingDetails: {
      senderFrom: { email: 'news@mail.localhost', displayName: 'Herald News' },
      subject: 'Hello [firstName]',
      emailBody: base64('<p>Dear [firstName], welcome.</p>'),
      ...details,
    },
    recipients: [{ to: 'ada@example.com' }],
    ...rest,
  };
}

export async function sandboxEmails(client: ApiClient, to?: string): Promise<SandboxEmail[]> {
  const response = await client.get(`/sandbox/email${to ? `?to=${encodeURIComponent(to)}` : ''}`);
  assert.equal(response.statusCode, 200, response.body);
  return response.json().messages as SandboxEmail[];
}

/** Each message the sandbox took, parsed back, by recipient. */
export async function parsedEmails(client: ApiClient): Promise<Map<string, ParsedMail>> {
  const parsed = new Map<string, ParsedMail>();
  for (const message of await sandboxEmails(client)) parsed.set(message.to, await simpleParser(message.raw));
  return parsed;
}

/** Posts a batch, expects 202, runs the queue until idle; answers the BatchId. */
export async function sendBatch(api: ApiTest, client: ApiClient, body: object): Promise<string> {
  const response = await client.post('/email/batch', body);
  assert.equal(response.statusCode, 202, response.body);
  await api.drain();
  return response.json().data.BatchId as string;
}

/** The person asked to hear again: the account lifts the address's suppression and opts its contact in. */
export async function subscribedAgain(api: ApiTest, client: ApiClient, address: string): Promise<void> {
  const lifted = await api.t.app.inject({
    method: 'DELETE',
    url: `/email/suppressions/${address}`,
    headers: { authorization: `Bearer ${client.token}` },
  });
  assert.equal(lifted.statusCode, 204, lifted.body);
  await client.upsert([{ email: address, emailOptIn: true }]);
}
