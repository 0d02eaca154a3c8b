import { hash } from 'node:crypto';

/**
 * Herald's id of one recipient's message (ARCHITECTURE.md: a UUID), the same however often it
 * is rendered: a retry after a 4xx, or a page rendered again after a crash, carries the id,
 * events and Message-ID of its first try. It is the name-based UUID (RFC 9562, version 5) of
 * the recipient's row id in the namespace of its send's id. The send id is random and shown
 * only to its account, so no one else can work an id out, and the tracking tokens a recipient
 * holds name the row but not the send: a recipient cannot reach the others' Message-IDs,
 * which a forged report could otherwise name (email/inbound.ts).
 */
export function recipientMessageId(sendId: string, recipientId: number): string {
  const namespace = Buffer.from(sendId.replaceAll('-', ''), 'hex');
  const digest = hash('sha1', Buffer.concat([namespace, Buffer.from(String(recipientId))]), 'buffer');
  digest[6] = (digest[6] & 0x0f) | 0x50;
  digest[8] = (digest[8] & 0x3f) | 0x80;
  const hex = digest.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
