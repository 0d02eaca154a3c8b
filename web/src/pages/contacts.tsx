import { useState } from 'preact/hooks';
import { ApiError, get, withQuery } from '../api.ts';
import { useLoad, usePages } from '../load.ts';
import { IdLink, Link, navigate, useLocation } from '../router.tsx';
import type { Contact, ContactList, Suppression } from '../types.ts';
import { Page, Part } from '../components/page.tsx';
import { ErrorMessage, Show } from '../components/states.tsx';
import { PagedTable, Table } from '../components/table.tsx';
import { Status } from '../components/status.tsx';
import { SEND_COLUMNS } from '../components/send.tsx';
import { PersonRights } from '../components/person-rights.tsx';
import { Time } from '../components/zone.tsx';
import { EmailBatchRow, emailBatchesPage } from './email.tsx';
import { SmsSendRow, smsSendsPage } from './sms.tsx';

/** The list every contact of an account is in (docs/contacts.md): it cannot be renamed, deleted or left. */
export const ALL_CONTACTS = 'All contacts';

export const mobileOf = (c: Contact) =>
  c.mobileNumber === null ? '—' : `+${c.mobileCountryCode ?? ''} ${c.mobileNumber}`;
export const yesNo = (value: boolean) => (value ? 'yes' : 'no');

export const CONTACT_COLUMNS = ['Contact id', 'Email', 'Mobile', 'Email opt-in', 'SMS opt-in', 'Updated'];

export function ContactRow(props: { contact: Contact }) {
  const c = props.contact;
  return (
    <tr>
      <td>
        <Link href={`/contacts/${c.contactId}`}>{c.contactId}</Link>
      </td>
      <td>{c.email ?? '—'}</td>
      <td class="mono">{mobileOf(c)}</td>
      <td>{yesNo(c.emailOptIn)}</td>
      <td>{yesNo(c.mobileOptIn)}</td>
      <td>
        <Time at={c.updatedAt} />
      </td>
    </tr>
  );
}

export const listsOf = () => get<{ lists: ContactList[] }>('/lists').then((body) => body.lists);

/** The account's property names, in the API's order. */
export const propertiesOf = () =>
  get<{ properties: Array<{ propertyid: string; propertyname: string }> }>('/contacts/properties').then((body) =>
    body.properties.map((p) => p.propertyname),
  );

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * What was typed, as the API's search takes it: a message id (a UUID), an address (it has an @), or
 * a number's country code and digits, its spaces, +, dashes and brackets left out.
 */
function searchOf(typed: string): { email: string } | { mobile: string } | { message: string } | null {
  const text = typed.trim();
  if (UUID.test(text)) return { message: text.toLowerCase() };
  if (text.includes('@')) return { email: text };
  const digits = text.replace(/[\s+().-]/g, '');
  return /^[0-9]{4,18}$/.test(digits) ? { mobile: digits } : null;
}

type Row = Suppression & { number?: string; email?: string };

/** The person's suppression on the channel of what was searched: at most one row. */
function PersonSuppressions(props: { email: string; mobile: string }) {
  const sms = props.mobile !== '';
  const path = sms
    ? withQuery('/sms/suppressions', { number: props.mobile })
    : withQuery('/email/suppressions', { email: props.email });
  const found = useLoad(() => get<{ suppressions: Row[] }>(path), path);
  return (
    <Show loaded={found}>
      {(data) => (
        <Table
          caption={sms ? 'SMS suppressions of the number' : 'Email suppressions of the address'}
          head={[sms ? 'Number' : 'Address', 'Reason', 'Since']}
          rows={data.suppressions.length}
          empty={`Not suppressed: messages to it are sent. Suppress it on the Suppressions page.`}
        >
          {data.suppressions.map((s) => (
            <tr key={s.number ?? s.email}>
              <td class="mono">{s.number ?? s.email}</td>
              <td>{s.reason}</td>
              <td>
                <Time at={s.createdAt} />
              </td>
            </tr>
          ))}
        </Table>
      )}
    </Show>
  );
}

/** The SMS sends that include the number, whether a contact holds it or not. */
function NumberSends(props: { mobile: string }) {
  const pages = usePages((cursor) => smsSendsPage(cursor, 20, props.mobile), `sms ${props.mobile}`);
  return (
    <PagedTable
      caption="SMS sends to the number, newest first"
      head={SEND_COLUMNS}
      pages={pages}
      row={(send) => <SmsSendRow key={send.queueId} send={send} />}
      empty="No SMS was sent to this number."
    />
  );
}

/** The email batches that include the address, whether a contact holds it or not. */
function AddressSends(props: { email: string }) {
  const pages = usePages((cursor) => emailBatchesPage(cursor, 20, props.email), `email ${props.email}`);
  return (
    <PagedTable
      caption="Email batches to the address, newest first"
      head={SEND_COLUMNS}
      pages={pages}
      row={(batch) => <EmailBatchRow key={batch.batchId} batch={batch} />}
      empty="No email was sent to this address."
    />
  );
}

/** `GET /messages/{messageId}`: one message, SMS or email, with the send it belongs to. */
interface Message {
  channel: 'sms' | 'email';
  queueId?: string;
  batchId?: string;
  messageId: string;
  recipient?: string;
  email?: string;
  status: string;
  reason: string | null;
}

/** A message found by its id: its send, its recipient (a link to find that person) and its status. */
function MessageFound(props: { messageId: string }) {
  const path = `/messages/${encodeURIComponent(props.messageId)}`;
  const found = useLoad(
    () =>
      get<Message>(path).catch((error: Error) => {
        if (error instanceof ApiError && error.status === 404) return null;
        throw error;
      }),
    path,
  );
  return (
    <Part title="Message" id="message-found">
      <Show loaded={found}>
        {(m) => {
          if (m === null) return <p>No message of this account has that id.</p>;
          const sendId = m.queueId ?? m.batchId ?? '';
          const address = m.recipient ?? m.email ?? '';
          const person = m.channel === 'sms' ? { mobile: address } : { email: address };
          return (
            <dl class="facts">
              <dt>Message id</dt>
              <dd class="mono id">{m.messageId}</dd>
              <dt>{m.channel === 'sms' ? 'SMS send' : 'Email batch'}</dt>
              <dd>
                <IdLink href={`/${m.channel}/${sendId}`} id={sendId} />
              </dd>
              <dt>To</dt>
              <dd>
                <Link href={withQuery('/contacts', person)}>{address}</Link>
              </dd>
              <dt>Status</dt>
              <dd>
                <Status word={m.status} />
              </dd>
              <dt>Reason</dt>
              <dd>{m.reason ?? '—'}</dd>
            </dl>
          );
        }}
      </Show>
    </Part>
  );
}

/**
 * Finds a person by a number or an address: the contacts that hold it, the sends that reached it
 * and its suppression. The search is in the URL (?email= or ?mobile=), so Back returns to it.
 */
export function Contacts() {
  const { query } = useLocation();
  const email = query.get('email') ?? '';
  const mobile = query.get('mobile') ?? '';
  const message = query.get('message') ?? '';
  const [typed, setTyped] = useState(email || mobile || message);
  const [unclear, setUnclear] = useState(false);
  const searched = email !== '' || mobile !== '';
  // The search whose person was erased here: what was found is read again, and shows them gone.
  const [erasedSearch, setErasedSearch] = useState('');
  const erased = searched && erasedSearch === `${email}|${mobile}`;
  const round = erased ? 'erased' : 'found';
  const found = useLoad(
    () =>
      searched
        ? get<{ contacts: Contact[] }>(withQuery('/contacts', { email, mobile }))
        : Promise.resolve({ contacts: [] }),
    `${email}|${mobile}|${round}`,
  );

  const search = (event: Event) => {
    event.preventDefault();
    const what = searchOf(typed);
    setUnclear(what === null);
    if (what) navigate(withQuery('/contacts', what));
  };
  return (
    <Page
      title="Contacts"
      actions={
        <Link href="/contacts/import" class="button">
          Import contacts
        </Link>
      }
    >
      <search aria-label="Find a person">
        <form class="inline-form" onSubmit={search}>
          <label>
            Number or address
            <input
              type="search"
              name="person"
              value={typed}
              onInput={(e) => setTyped(e.currentTarget.value)}
              autocomplete="off"
              aria-describedby="person-hint"
            />
          </label>
          <button type="submit">Search</button>
          <span id="person-hint" class="muted">
            An email address, a mobile with its country code (919812345678), or a message id.
          </span>
        </form>
      </search>
      {unclear && (
        <ErrorMessage
          error={new Error('Type an email address, a number (its country code and digits) or a message id.')}
        />
      )}
      {message !== '' && <MessageFound key={message} messageId={message} />}
      {searched && (
        <>
          <Part title="Contacts" id="person-contacts">
            <Show loaded={found}>
              {(data) => (
                <Table
                  caption="Contacts found"
                  head={CONTACT_COLUMNS}
                  rows={data.contacts.length}
                  empty="No contact has that email or mobile."
                >
                  {data.contacts.map((c) => (
                    <ContactRow key={c.contactId} contact={c} />
                  ))}
                </Table>
              )}
            </Show>
          </Part>
          <Part title="Messages" id="person-messages">
            {mobile !== '' ? <NumberSends key={round} mobile={mobile} /> : <AddressSends key={round} email={email} />}
          </Part>
          <Part title="Suppression" id="person-suppression">
            {erased ? (
              <p>
                Erased: they stay suppressed, by a keyed hash of their number or address that the suppression lists do
                not show.
              </p>
            ) : (
              <PersonSuppressions email={email} mobile={mobile} />
            )}
          </Part>
          <PersonRights
            key={`${email}|${mobile}`}
            person={mobile !== '' ? { mobile } : { email }}
            onErased={() => setErasedSearch(`${email}|${mobile}`)}
          />
        </>
      )}
    </Page>
  );
}
