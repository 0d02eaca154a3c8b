import { useState } from 'preact/hooks';
import { get, withQuery } from '../api.ts';
import { usePages } from '../load.ts';
import type { EmailBatch, EmailRecipient, EmailSummary } from '../types.ts';
import { Page, Part } from '../components/page.tsx';
import { Show } from '../components/states.tsx';
import { Status } from '../components/status.tsx';
import { PagedTable, Table } from '../components/table.tsx';
import { HtmlPreview } from '../components/preview.tsx';
import {
  CancelSend,
  ContentWithheld,
  History,
  SEND_COLUMNS,
  SendFacts,
  SendRow,
  StatusFilter,
  useSendRead,
} from '../components/send.tsx';
import { Num, Time, useNumber } from '../components/zone.tsx';

/** The email batches, newest first; with `email`, those that include the address. */
export const emailBatchesPage = (cursor: string | undefined, limit = 20, email?: string) =>
  get<{ batches: EmailSummary[]; nextCursor: string | null }>(withQuery('/email/batch', { cursor, limit, email })).then(
    (page) => ({ items: page.batches, nextCursor: page.nextCursor }),
  );

export const EmailBatchRow = (props: { batch: EmailSummary }) => (
  <SendRow href={`/email/${props.batch.batchId}`} id={props.batch.batchId} summary={props.batch} />
);

export function EmailBatches() {
  const pages = usePages((cursor) => emailBatchesPage(cursor), 'email');
  return (
    <Page title="Email batches">
      <PagedTable
        caption="Email batches, newest first"
        head={SEND_COLUMNS}
        pages={pages}
        row={(batch) => <EmailBatchRow key={batch.batchId} batch={batch} />}
        empty="No email sent yet."
      />
    </Page>
  );
}

/** Recipient statuses of an email handed over for sending: every one was Processed first. */
const HANDED_OVER = ['Processed', 'Deferred', 'Bounce', 'Delivered'];
const REFUSED = new Set(['Bounce', 'Dropped']);

/**
 * Processed → delivered from the batch's totals, opened and clicked from its engagement: the
 * recipients of the whole batch with each event, whatever page of them is loaded below.
 */
function Funnel(props: { batch: EmailBatch }) {
  const { totals, engagement } = props.batch;
  const processed = HANDED_OVER.reduce((sum, word) => sum + (totals[word] ?? 0), 0);
  const steps = [
    { name: 'Processed', n: processed },
    { name: 'Delivered', n: totals.Delivered ?? 0 },
    { name: 'Opened', n: engagement.opened },
    { name: 'Clicked', n: engagement.clicked },
  ];
  const share = (n: number) => (processed === 0 ? 0 : Math.round((n / processed) * 100));
  const number = useNumber();
  return (
    <>
      <ol class="funnel" aria-label="Funnel">
        {steps.map((step) => (
          <li key={step.name}>
            <span class="funnel-name">{step.name}</span>
            <span class="funnel-bar" aria-hidden="true">
              <span style={{ width: `${share(step.n)}%` }} />
            </span>
            <span class="funnel-count">
              {number(step.n)} ({share(step.n)}%)
            </span>
          </li>
        ))}
      </ol>
      <p>
        {number(engagement.unsubscribed)} unsubscribed, {number(engagement.complaints)} reported it as spam.
      </p>
    </>
  );
}

const lastReply = (r: EmailRecipient) => r.history.findLast((h) => h.reply !== undefined)?.reply ?? null;

function RecipientRow(props: { recipient: EmailRecipient }) {
  const r = props.recipient;
  return (
    <tr>
      <td class="mono">{r.email}</td>
      <td class="mono id">{r.messageId ?? '—'}</td>
      <td>
        <Status word={r.status} />
        {r.dueAt ? (
          <>
            {' '}
            for <Time at={r.dueAt} />
          </>
        ) : null}
      </td>
      <td>{r.reason ?? '—'}</td>
      <td>
        <History events={r.history.map((h) => ({ word: h.event, at: h.at, detail: h.url ?? h.reply }))} />
      </td>
    </tr>
  );
}

/** What the batch said, before each recipient's tags fill it: its sender, subject, preheader, and HTML in a preview. */
function EmailContentPart(props: { batch: EmailBatch }) {
  const { contentState, content } = props.batch;
  return (
    <Part title="Message" id="message">
      {contentState === 'available' ? (
        <>
          <dl class="facts">
            <dt>From</dt>
            <dd>{content.senderName ? `${content.senderName} <${content.senderFrom}>` : content.senderFrom}</dd>
            <dt>Subject</dt>
            <dd>{content.subject}</dd>
            <dt>Preheader</dt>
            <dd>{content.preHeaderText ?? '—'}</dd>
          </dl>
          <HtmlPreview html={content.html ?? ''} title="Preview of the email's HTML" />
        </>
      ) : (
        <ContentWithheld state={contentState} what="email" />
      )}
    </Part>
  );
}

export function EmailBatchPage(props: { batchId: string }) {
  const path = `/email/batch/${encodeURIComponent(props.batchId)}`;
  const [status, setStatus] = useState('');
  const { send, recipients } = useSendRead<EmailBatch, EmailRecipient>(path, status);
  return (
    <Show loaded={send}>
      {(batch) => {
        const refused = recipients.items.filter((r) => REFUSED.has(r.status));
        return (
          <Page
            title="Email batch"
            actions={
              <CancelSend
                path={path}
                what="batch"
                scheduled={batch.status === 'Scheduled'}
                onCancelled={recipients.reload}
              />
            }
          >
            <SendFacts id={batch.batchId} idName="Batch id" summary={batch} />
            <EmailContentPart batch={batch} />
            <Part title="Funnel" id="funnel">
              <Funnel batch={batch} />
            </Part>
            <Part title="Bounces and drops" id="refused">
              <p>
                <Num n={batch.totals.Bounce ?? 0} /> bounced, <Num n={batch.totals.Dropped ?? 0} /> dropped in all.
              </p>
              <Table
                caption="Bounces and drops with their reasons"
                head={['Recipient', 'Status', 'Reason', 'Server reply']}
                rows={refused.length}
                empty="None among the recipients loaded."
              >
                {refused.map((r) => (
                  <tr key={r.email}>
                    <td class="mono">{r.email}</td>
                    <td>
                      <Status word={r.status} />
                    </td>
                    <td>{r.reason ?? '—'}</td>
                    <td>{lastReply(r) ?? '—'}</td>
                  </tr>
                ))}
              </Table>
            </Part>
            <Part title="Recipients" id="recipients">
              <StatusFilter totals={batch.totals} status={status} onChange={setStatus} />
              <PagedTable
                caption="Recipients"
                head={['Recipient', 'Message id', 'Status', 'Reason', 'History']}
                pages={recipients}
                row={(r) => <RecipientRow key={r.email} recipient={r} />}
              />
            </Part>
          </Page>
        );
      }}
    </Show>
  );
}
