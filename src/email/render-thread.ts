/**
 * A thread of the render pool (render-pool.ts): renders the recipients it is given with the
 * batch's compiled email and its tracking key, signs each with the batch's DKIM key, and
 * answers their raw MIME, moved rather than copied back. It loads the renderer and the
 * signer and nothing of the database, so its heap stays small.
 */
import type { KeyObject } from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import { Keyring } from '../sealed.ts';
import { signEmail } from './dkim.ts';
import type { RenderRequest, RenderResponse, ThreadBatch } from './render-pool.ts';
import { renderEmail } from './render.ts';
import { recipientUrls } from './tracking.ts';

interface Batch extends Omit<ThreadBatch, 'trackingKey'> {
  tracking: Keyring;
}

const batches = new Map<string, Batch>();

async function render(request: Extract<RenderRequest, { kind: 'render' }>): Promise<Uint8Array[]> {
  const batch = batches.get(request.batch);
  if (!batch) throw new Error(`the render thread was not given batch ${request.batch}`);
  const date = new Date(request.date);
  const raws: Uint8Array[] = [];
  for (const r of request.recipients) {
    const rendered = await renderEmail(batch.compiled, {
      to: r.to,
      sources: r.sources,
      messageId: r.messageId,
      urls: recipientUrls(
        batch.tracking,
        batch.publicUrl,
        { recipientId: r.recipientId, sendId: batch.sendId },
        batch.mailboxDomain,
      ),
      date,
    });
    raws.push(await signEmail(rendered, batch.dkimKey));
  }
  return raws;
}

/** A buffer of its own, which can be moved to the other thread (a small one may share Node's pool with others). */
const movable = (raw: Uint8Array) =>
  raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength ? raw : new Uint8Array(raw);

let turn = Promise.resolve();

parentPort!.on('message', (request: RenderRequest) => {
  if (request.kind === 'batch') {
    const { trackingKey, ...rest } = request.batch;
    batches.set(request.id, { ...rest, tracking: new Keyring(trackingKey as KeyObject) });
    return;
  }
  if (request.kind === 'forget') {
    batches.delete(request.id);
    return;
  }
  // One call after another, in the order asked: signing waits on its streams, and calls taken
  // together would all finish late, the group to hand over first with those rendered ahead.
  turn = turn.then(() =>
    render(request).then(
      (raws) => {
        const moved = raws.map(movable);
        parentPort!.postMessage(
          { call: request.call, raws: moved } satisfies RenderResponse,
          moved.map((raw) => raw.buffer as ArrayBuffer),
        );
      },
      (error: unknown) =>
        parentPort!.postMessage({
          call: request.call,
          error: error instanceof Error ? error.message : String(error),
        } satisfies RenderResponse),
    ),
  );
});
