import { useState } from 'preact/hooks';
import { get, withQuery } from '../api.ts';
import { useLoad, usePages } from '../load.ts';
import { IdLink, Link, navigate, useLocation } from '../router.tsx';
import type { Contact, ContactList, ContactMessage } from '../types.ts';
import { Page, Part } from '../components/page.tsx';
import { Show } from '../components/states.tsx';
import { Status } from '../components/status.tsx';
import { PagedTable, Table } from '../components/table.tsx';
import { Time } from '../components/zone.tsx';

const mobileOf = (c: Contact) => (c.mobileNumber === null ? '—' : `+${c.mobileCountryCode ?? ''} ${c.mobileNumber}`);
const yesNo = (value: boolean) => (value ? 'yes' : 'no');

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

/** Search by email or mobile; the search is in the URL (?email= or ?mobile=), so Back returns to it. */
export function Contacts() {
  const { query } = useLocation();
  const email = query.get('email') ?? '';
  const mobile = query.get('mobile') ?? '';
  const [emailInput, setEmail] = useState(email);
  const [mobileInput, setMobile] = useState(mobile);
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
    navigate(withQuery('/contacts', { email: emailInput.trim(), mobile: mobileInput.replace(/\D/g, '') }));
  };
  return (
    <Page title="Contacts">
      <search aria-label="Contacts">
        <form class="inline-form" onSubmit={search}>
          <label>
            Email
            <input
              type="email"
              name="email"
              value={emailInput}
              onInput={(e) => setEmail(e.currentTarget.value)}
              autocomplete="off"
            />
          </label>
          <label>
            Mobile (country code and number)
            <input
              type="tel"
              name="mobile"
              value={mobileInput}
              onInput={(e) => setMobile(e.currentTarget.value)}
              inputMode="numeric"
              autocomplete="off"
            />
          </label>
          <button type="submit">Search</button>
        </form>
      </search>
      {searched && (
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
      )}
      <p>
        <Link href="/lists">Browse the lists</Link>
      </p>
    </Page>
  );
}

export const listsOf = () => get<{ lists: ContactList[] }>('/lists').then((body) => body.lists);

function Messages(props: { contactId: string }) {
  const path = `/contacts/${encodeURIComponent(props.contactId)}/messages`;
  const pages = usePages(
    (cursor) =>
      get<{ messages: ContactMessage[]; nextCursor: string | null }>(withQuery(path, { cursor, limit: 50 })).then(
        (page) => ({ items: page.messages, nextCursor: page.nextCursor }),
      ),
    path,
  );
  return (
    <PagedTable
      caption="Messages sent to this contact, newest first"
      head={['Channel', 'Send', 'Sent', 'Address', 'Status', 'Reason', 'Status since']}
      pages={pages}
      empty="Nothing was sent to this contact."
      row={(m) => (
        <tr key={`${m.sendId} ${m.address}`}>
          <td>{m.channel === 'sms' ? 'SMS' : 'Email'}</td>
          <td>
            <IdLink href={`/${m.channel}/${m.sendId}`} id={m.sendId} />
          </td>
          <td>
            <Time at={m.sentAt} />
          </td>
          <td class="mono">{m.address}</td>
          <td>
            <Status word={m.status} />
          </td>
          <td>{m.reason ?? '—'}</td>
          <td>
            <Time at={m.updatedAt} />
          </td>
        </tr>
      )}
    />
  );
}

export function ContactPage(props: { contactId: string }) {
  const path = `/contacts/${encodeURIComponent(props.contactId)}`;
  const loaded = useLoad(() => Promise.all([get<Contact>(path), listsOf()]), path);
  return (
    <Show loaded={loaded}>
      {([contact, lists]) => {
        const names = new Map(lists.map((list) => [list.listId, list.name]));
        return (
          <Page title="Contact">
            <dl class="facts">
              <dt>Contact id</dt>
              <dd>{contact.contactId}</dd>
              <dt>Email</dt>
              <dd>{contact.email ?? '—'}</dd>
              <dt>Mobile</dt>
              <dd class="mono">{mobileOf(contact)}</dd>
              <dt>Email opt-in</dt>
              <dd>{yesNo(contact.emailOptIn)}</dd>
              <dt>SMS opt-in</dt>
              <dd>{yesNo(contact.mobileOptIn)}</dd>
              <dt>Created</dt>
              <dd>
                <Time at={contact.createdAt} />
              </dd>
              <dt>Updated</dt>
              <dd>
                <Time at={contact.updatedAt} />
              </dd>
            </dl>
            <Part title="Lists" id="contact-lists">
              {contact.listIds.length === 0 ? (
                <p class="muted">In no list.</p>
              ) : (
                <ul>
                  {contact.listIds.map((id) => (
                    <li key={id}>
                      <Link href={`/lists/${id}`}>{names.get(id) ?? id}</Link>
                    </li>
                  ))}
                </ul>
              )}
            </Part>
            <Part title="Properties" id="contact-properties">
              <Table
                caption="Properties"
                head={['Property', 'Value']}
                rows={contact.propertyfields.length}
                empty="No properties."
              >
                {contact.propertyfields.map((p) => (
                  <tr key={p.propertyid}>
                    <td>{p.propertyname}</td>
                    <td class="pre">{p.propertyvalue}</td>
                  </tr>
                ))}
              </Table>
            </Part>
            <Part title="Messages" id="contact-messages">
              <Messages contactId={props.contactId} />
            </Part>
          </Page>
        );
      }}
    </Show>
  );
}
