import { useState } from 'preact/hooks';
import { get, withQuery } from '../api.ts';
import { useLoad, usePages } from '../load.ts';
import { Link, navigate, useLocation } from '../router.tsx';
import type { Contact, ContactList, Suppression } from '../types.ts';
import { Page, Part } from '../components/page.tsx';
import { ErrorMessage, Show } from '../components/states.tsx';
import { PagedTable, Table } from '../components/table.tsx';
import { SEND_COLUMNS } from '../components/send.tsx';
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

/**
 * What was typed, as the API's search takes it: an address (it has an @), or a number's country code
 * and digits, its spaces, +, dashes and brackets left out.
 */
function searchOf(typed: string): { email: string } | { mobile: string } | null {
  const text = typed.trim();
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

/**
 * Finds a person by a number or an address: the contacts that hold it, the sends that reached it
 * and its suppression. The search is in the URL (?email= or ?mobile=), so Back returns to it.
 */
export function Contacts() {
  const { query } = useLocation();
  const email = query.get('email') ?? '';
  const mobile = query.get('mobile') ?? '';
  const [typed, setTyped] = useState(email || mobile);
  const [unclear, setUnclear] = useState(false);
  const searched = email !== '' || mobile !== '';
  const found = useLoad(
    () =>
      searched
        ? get<{ contacts: Contact[] }>(withQuery('/contacts', { email, mobile }))
        : Promise.resolve({ contacts: [] }),
    `${email}|${mobile}`,
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
            An email address, or a mobile with its country code (919812345678).
          </span>
        </form>
      </search>
      {unclear && (
        <ErrorMessage error={new Error('Type an email address, or a number: its country code and digits.')} />
      )}
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
            {mobile !== '' ? <NumberSends mobile={mobile} /> : <AddressSends email={email} />}
          </Part>
          <Part title="Suppression" id="person-suppression">
            <PersonSuppressions email={email} mobile={mobile} />
          </Part>
        </>
      )}
    </Page>
  );
}
