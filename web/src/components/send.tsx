import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { get, request, withQuery } from '../api.ts';
import { usePages, type Loaded, type Pages } from '../load.ts';
import { IdLink } from '../router.tsx';
import type { ContentState, SendSummary, Totals } from '../types.ts';
import { CopyId } from './copy-id.tsx';
import { ErrorMessage } from './states.tsx';
import { Status, TotalsText } from './status.tsx';
import { Time, useNumber } from './zone.tsx';

/**
 * One send's read (`GET /sms/{id}`, `GET /email/batch/{id}`): its summary from the first page
 * (kept while the recipients load again), its recipients a page at a time, only those at
 * `status` when it is given (the read's `?status=`).
 */
export function useSendRead<S extends SendSummary & { recipients: R[]; nextCursor: string | null }, R>(
  path: string,
  status: string,
): { send: Loaded<S>; recipients: Pages<R> } {
  const [send, setSend] = useState<S | null>(null);
  const recipients = usePages(async (cursor) => {
    const page = await get<S>(withQuery(path, { cursor, status }));
    if (cursor === undefined) setSend(page);
    return { items: page.recipients, nextCursor: page.nextCursor };
  }, `${path} ${status}`);
  const first = recipients.first;
  return {
    send: send !== null ? { state: 'done', data: send } : first.state === 'failed' ? first : { state: 'loading' },
    recipients,
  };
}

/** The columns of a listing of sends (SendRow). */
export const SEND_COLUMNS = ['Id', 'Created', 'Scheduled for', 'Status', 'Recipients by status'];

/**
 * A send in a listing, of either channel: its id linking to its page (`href`), its times, status
 * and recipients by status.
 */
export function SendRow(props: { href: string; id: string; summary: SendSummary }) {
  const { summary } = props;
  return (
    <tr>
      <td>
        <IdLink href={props.href} id={props.id} />
      </td>
      <td>
        <Time at={summary.createdAt} />
      </td>
      <td>
        <Time at={summary.scheduledAt} />
      </td>
      <td>
        <Status word={summary.status} />
      </td>
      <td>
        <TotalsText totals={summary.totals} />
      </td>
    </tr>
  );
}

/** The facts every send shows: its id, status, times and recipients by status; `children` adds the channel's own. */
export function SendFacts(props: { id: string; idName: string; summary: SendSummary; children?: ComponentChildren }) {
  const { summary } = props;
  return (
    <dl class="facts">
      <dt>{props.idName}</dt>
      <dd>
        <CopyId id={props.id} name={props.idName.toLowerCase()} />
      </dd>
      <dt>Status</dt>
      <dd>
        <Status word={summary.status} />
      </dd>
      <dt>Created</dt>
      <dd>
        <Time at={summary.createdAt} />
      </dd>
      <dt>Scheduled for</dt>
      <dd>
        <Time at={summary.scheduledAt} />
      </dd>
      <dt>Recipients by status</dt>
      <dd>
        <TotalsText totals={summary.totals} />
      </dd>
      {props.children}
    </dl>
  );
}

/**
 * "Status" over the recipients' table: all of them, or those at one status word, as the send's
 * totals name them (a word the send has no recipient at finds none).
 */
export function StatusFilter(props: { totals: Totals; status: string; onChange: (status: string) => void }) {
  const number = useNumber();
  const words = Object.keys(props.totals);
  if (props.status !== '' && !words.includes(props.status)) words.push(props.status);
  return (
    <label class="filter">
      Status
      <select value={props.status} onChange={(event) => props.onChange(event.currentTarget.value)}>
        <option value="">All</option>
        {words.map((word) => (
          <option key={word} value={word}>{`${word} (${number(props.totals[word] ?? 0)})`}</option>
        ))}
      </select>
    </label>
  );
}

/** What a send's page says in place of its content when its read shows none (`contentState`). */
export function ContentWithheld(props: { state: Exclude<ContentState, 'available'>; what: string }) {
  const why =
    props.state === 'sealed'
      ? `Sealed: the ${props.what} was sent with isBodyEncrypted, kept encrypted, and is never shown.`
      : `Purged: retention removed the ${props.what} some days after the send completed (RETENTION_DAYS). ` +
        'What became of it stays.';
  return <p class="withheld">{why}</p>;
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
export function CancelSend(props: {
  path: string;
  what: 'send' | 'batch';
  scheduled: boolean;
  onCancelled: () => void;
}) {
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
      {props.scheduled && (
        <button type="button" class="danger" onClick={cancel} disabled={busy}>
          Cancel {props.what}
        </button>
      )}
      {error && <ErrorMessage error={error} />}
      {cancelled && (
        <p role="status" class="notice">
          The {props.what} was cancelled: nothing of it will go out.
        </p>
      )}
    </div>
  );
}
