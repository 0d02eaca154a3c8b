import { formatMoney } from '../numbers.ts';
import { useState } from 'preact/hooks';
import { get, withQuery } from '../api.ts';
import { usePages } from '../load.ts';
import type { SmsRecipient, SmsSend, SmsSummary } from '../types.ts';
import { Page, Part } from '../components/page.tsx';
import { Show } from '../components/states.tsx';
import { Status } from '../components/status.tsx';
import { PagedTable } from '../components/table.tsx';
import { Num, Time, useNumber } from '../components/zone.tsx';
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

/** The SMS requests, newest first; with `recipient`, those that include the number. */
export const smsSendsPage = (cursor: string | undefined, limit = 20, recipient?: string) =>
  get<{ sends: SmsSummary[]; nextCursor: string | null }>(withQuery('/sms', { cursor, limit, recipient })).then(
    (page) => ({
      items: page.sends,
      nextCursor: page.nextCursor,
    }),
  );

export const SmsSendRow = (props: { send: SmsSummary }) => (
  <SendRow href={`/sms/${props.send.queueId}`} id={props.send.queueId} summary={props.send} />
);

export function SmsSends() {
  const pages = usePages((cursor) => smsSendsPage(cursor), 'sms');
  return (
    <Page title="SMS sends">
      <PagedTable
        caption="SMS sends, newest first"
        head={SEND_COLUMNS}
        pages={pages}
        row={(send) => <SmsSendRow key={send.queueId} send={send} />}
        empty="No SMS sent yet."
      />
    </Page>
  );
}

const RECIPIENT_COLUMNS = [
  'Recipient',
  'Message id',
  'Status',
  'Parts',
  'Price',
  'SMSC',
  'Encoding',
  'Reason or error',
  'History',
  'Parts at the operator',
  'Clicks',
];

function RecipientRow(props: { recipient: SmsRecipient }) {
  const r = props.recipient;
  const number = useNumber();
  // "2 replaced" alone could be read as parts: say what was replaced.
  const replaced = (n: number) => `${number(n)} ${n === 1 ? 'character' : 'characters'} replaced`;
  return (
    <tr>
      <td class="mono">{r.recipient}</td>
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
      <td>{r.parts ?? '—'}</td>
      <td>{r.price ? formatMoney([r.price]) : '—'}</td>
      <td>{r.smsc ?? '—'}</td>
      <td>
        {r.encoding ?? '—'}
        {r.replacedCharacters ? `, ${replaced(r.replacedCharacters)} by smart encoding` : ''}
      </td>
      <td>{[r.reason, r.error].filter(Boolean).join('; ') || '—'}</td>
      <td>
        <History events={r.history.map((h) => ({ word: h.status, at: h.at }))} />
      </td>
      <td>{r.partStatus.length === 0 ? '—' : r.partStatus.map((p) => `${p.part}: ${p.status}`).join(', ')}</td>
      <td>
        {r.clicks.length === 0 ? (
          '0'
        ) : (
          <>
            {r.clicks.length}, first <Time at={r.clicks[0].at} />
          </>
        )}
      </td>
    </tr>
  );
}

/** What the send said: its sender name and text as the request gave them, tags unfilled. */
function SmsContentPart(props: { send: SmsSend }) {
  const { contentState, content } = props.send;
  return (
    <Part title="Message" id="message">
      {contentState === 'available' ? (
        <dl class="facts">
          <dt>Sender name</dt>
          <dd>{content.senderName}</dd>
          <dt>Text</dt>
          <dd class="pre message-text">{content.body}</dd>
        </dl>
      ) : (
        <ContentWithheld state={contentState} what="text" />
      )}
    </Part>
  );
}

export function SmsSendPage(props: { queueId: string }) {
  const path = `/sms/${encodeURIComponent(props.queueId)}`;
  const [status, setStatus] = useState('');
  const { send, recipients } = useSendRead<SmsSend, SmsRecipient>(path, status);
  return (
    <Show loaded={send}>
      {(send) => (
        <Page
          title="SMS send"
          actions={
            <CancelSend
              path={path}
              what="send"
              scheduled={send.status === 'Scheduled'}
              onCancelled={recipients.reload}
            />
          }
        >
          <SendFacts id={send.queueId} idName="Queue id" summary={send}>
            <dt>Parts billed</dt>
            <dd>
              <Num n={send.partsBilled} />
            </dd>
            <dt>Link clicks</dt>
            <dd>
              <Num n={send.clicks} />
            </dd>
          </SendFacts>
          <SmsContentPart send={send} />
          <Part title="Recipients" id="recipients">
            <StatusFilter totals={send.totals} status={status} onChange={setStatus} />
            <PagedTable
              caption="Recipients"
              head={RECIPIENT_COLUMNS}
              pages={recipients}
              row={(r) => <RecipientRow key={r.recipient} recipient={r} />}
            />
          </Part>
        </Page>
      )}
    </Show>
  );
}
