import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { get, request, withQuery } from '../api.ts';
import { usePages, type Loaded, type Pages } from '../load.ts';
import { IdLink } from '../router.tsx';
import type { SendSummary } from '../types.ts';
import { ErrorMessage } from './states.tsx';
import { Status, TotalsText } from './status.tsx';
import { Time } from './zone.tsx';

/**
 * One send's read (`GET /sms/{id}`, `GET /email/batch/{id}`): its summary from the first page
 * (kept while the recipients load again), its recipients a page at a time.
 */
export function useSendRead<S extends SendSummary & { recipients: R[]; nextCursor: string | null }, R>(path: string): { send: Loaded<S>; recipients: Pages<R> } {
  const [send, setSend] = useState<S | null>(null);
  const recipients = usePages(async (cursor) => {
    const page = await get<S>(withQuery(path, { cursor }));
    if (cursor === undefined) setSend(page);
    return { items: page.recipients, nextCursor: page.nextCursor };
  }, path);
  const first = recipients.first;
  return { send: send !== null ? { state: 'done', data: send } : first.state === 'failed' ? first : { state: 'loading' }, recipients };
}

/** The columns of a listing of sends (SendRow). */
export const SEND_COLUMNS = ['Id', 'Created', 'Scheduled for', 'Status', 'Recipients by status'];

/** A send in a listing, of either channel: its id linking to its page (`href`), its times, status and recipients by status. */
export function SendRow(props: { href: string; id: string; summary: SendSummary }) {
  const { summary } = props;
  return (
    <tr>
      <td><IdLink href={props.href} id={props.id} /></td>
      <td><Time at={summary.createdAt} /></td>
      <td><Time at={summary.scheduledAt} /></td>
      <td><Status word={summary.status} /></td>
      <td><TotalsText totals={summary.totals} /></td>
    </tr>
  );
}

/** The facts every send shows: its id, status, times and recipients by status; `children` adds the channel's own. */
export function SendFacts(props: { id: string; idName: string; summary: SendSummary; children?: ComponentChildren }) {
  const { summary } = props;
  return (
    <dl class="facts">
      <dt>{props.idName}</dt>
      <dd class="mono">{props.id}</dd>
      <dt>Status</dt>
      <dd><Status word={summary.status} /></dd>
      <dt>Created</dt>
      <dd><Time at={summary.createdAt} /></dd>
      <dt>Scheduled for</dt>
      <dd><Time at={summary.scheduledAt} /></dd>
      <dt>Recipients by status</dt>
      <dd><TotalsText totals={summary.totals} /></dd>
      {props.children}
    </dl>
  );
}

/** A recipient's history, oldest first: one line per status or event. */
export function History(props: { events: Array<{ word: string; at: string; detail?: string }> }) {
  if (props.events.length === 0) return <span class="muted">—</span>;
  return (
    <ol class="history">
      {props.events.map((event, i) => (
        <li key={i}>
          <span class="history-word">{event.word}</span> <Time at={event.at} />
          {event.detail && <span class="history-detail"> {event.detail}</span>}
        </li>
      ))}
    </ol>
  );
}

/**
 * "Cancel send" ("Cancel batch") while a send is Scheduled: DELETE on its read's path, which
 * answers 409 once sending started; then the send is read again and shows Cancelled.
 */
export function CancelSend(props: { path: string; what: 'send' | 'batch'; scheduled: boolean; onCancelled: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | null>(null);
  const [cancelled, setCancelled] = useState(false);
  const cancel = async () => {
    setBusy(true);
    setError(null);
    try {
      await request('DELETE', props.path);
      setCancelled(true);
      props.onCancelled();
    } catch (failure) {
      setError(failure as Error);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="cancel">
      {props.scheduled && <button type="button" class="danger" onClick={cancel} disabled={busy}>Cancel {props.what}</button>}
      {error && <ErrorMessage error={error} />}
      {cancelled && <p role="status" class="notice">The {props.what} was cancelled: nothing of it will go out.</p>}
    </div>
  );
}
