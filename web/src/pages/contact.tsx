import { useState } from 'preact/hooks';
import { get, request, withQuery } from '../api.ts';
import { type Draft, draftOf, patchOf } from '../contact-form.ts';
import { useLoad, usePages } from '../load.ts';
import { IdLink, Link } from '../router.tsx';
import { type Erasure, erasedWords, personOfContact } from '../privacy.ts';
import type { Contact, ContactList, ContactMessage, Page as PageOf } from '../types.ts';
import { useChange } from '../components/change.ts';
import { Confirm } from '../components/confirm.tsx';
import { Field } from '../components/field.tsx';
import { PersonRights } from '../components/person-rights.tsx';
import { Page, Part } from '../components/page.tsx';
import { ErrorMessage, Show } from '../components/states.tsx';
import { Status } from '../components/status.tsx';
import { PagedTable, Table } from '../components/table.tsx';
import { Time, useNumber } from '../components/zone.tsx';
import { ALL_CONTACTS, listsOf, mobileOf, propertiesOf, yesNo } from './contacts.tsx';

/** A page of the messages sent to a contact, newest first. */
const messagesOf = (contactId: string, cursor?: string): Promise<PageOf<ContactMessage>> =>
  get<{ messages: ContactMessage[]; nextCursor: string | null }>(
    withQuery(`/contacts/${encodeURIComponent(contactId)}/messages`, { cursor, limit: 50 }),
  ).then((page) => ({ items: page.messages, nextCursor: page.nextCursor }));

/** Its first page is loaded with the contact: a table that grew later would move the buttons below it. */
function Messages(props: { contactId: string; firstPage: PageOf<ContactMessage> }) {
  const pages = usePages((cursor) => messagesOf(props.contactId, cursor), props.contactId, props.firstPage);
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

function EditContact(props: { contact: Contact; properties: string[]; onSaved: (contact: Contact) => void }) {
  const { contact, properties } = props;
  const before = draftOf(contact, properties);
  const [draft, setDraft] = useState(before);
  const [sent, setSent] = useState<string[]>([]);
  const change = useChange();
  const set = (patch: Partial<Draft>) => setDraft((d) => ({ ...d, ...patch }));
  const problem = (field: string) => change.fieldErrors.get(field);
  // `propertyfields[2].propertyname` is the third property the PATCH sent.
  const propertyProblem = (name: string) => {
    const i = sent.indexOf(name);
    return i < 0 ? undefined : (problem(`propertyfields[${i}].propertyname`) ?? problem(`propertyfields[${i}]`));
  };
  const save = (event: Event) => {
    event.preventDefault();
    const patch = patchOf(before, draft);
    if (Object.keys(patch).length === 0) {
      void change.run(async () => {}, 'Nothing was changed.');
      return;
    }
    const names = (patch.propertyfields ?? []).map((p) => p.propertyname);
    setSent(names);
    void change.run(async () => {
      const saved = await request<Contact>('PATCH', `/contacts/${contact.contactId}`, patch);
      props.onSaved(saved);
      setDraft(draftOf(saved, properties));
    }, 'The contact is saved.');
  };
  return (
    <form class="edit-form" onSubmit={save} noValidate aria-label="Edit the contact">
      <p class="muted">A blank email or mobile keeps its value: neither can be removed, only changed.</p>
      <Field
        id="contact-email"
        label="Email"
        value={draft.email}
        inputMode="email"
        onInput={(email) => set({ email })}
        problem={problem('email')}
      />
      <div class="field-row">
        <Field
          id="contact-country-code"
          label="Mobile country code"
          value={draft.mobileCountryCode}
          inputMode="numeric"
          onInput={(mobileCountryCode) => set({ mobileCountryCode })}
          problem={problem('mobileCountryCode')}
        />
        <Field
          id="contact-mobile-number"
          label="Mobile number"
          value={draft.mobileNumber}
          inputMode="numeric"
          onInput={(mobileNumber) => set({ mobileNumber })}
          problem={problem('mobileNumber')}
        />
      </div>
      <label class="check">
        <input
          type="checkbox"
          checked={draft.emailOptIn}
          onChange={(e) => set({ emailOptIn: e.currentTarget.checked })}
        />
        Email opt-in
      </label>
      <label class="check">
        <input
          type="checkbox"
          checked={draft.mobileOptIn}
          onChange={(e) => set({ mobileOptIn: e.currentTarget.checked })}
        />
        SMS opt-in
      </label>
      {properties.map((name, i) => (
        <Field
          key={name}
          id={`contact-property-${i}`}
          label={`Property ${name}`}
          value={draft.properties[name]}
          multiline
          onInput={(value) => set({ properties: { ...draft.properties, [name]: value } })}
          problem={propertyProblem(name)}
        />
      ))}
      <p>
        <button type="submit" disabled={change.busy}>
          Save contact
        </button>
      </p>
      {change.error && <ErrorMessage error={change.error} />}
      {problem('') && <p class="error">{problem('')}</p>}
      <p role="status" class="notice">
        {change.notice}
      </p>
    </form>
  );
}

function ContactLists(props: { contact: Contact; lists: ContactList[]; onChanged: () => Promise<void> }) {
  const { contact, lists } = props;
  const names = new Map(lists.map((list) => [list.listId, list.name]));
  const others = lists.filter((list) => !contact.listIds.includes(list.listId) && list.name !== ALL_CONTACTS);
  const [adding, setAdding] = useState('');
  const change = useChange();
  const takeOff = (listId: string) =>
    change.run(
      async () => {
        await request('DELETE', `/lists/${listId}/contacts/${contact.contactId}`);
        await props.onChanged();
      },
      `Taken off ${names.get(listId) ?? listId}.`,
    );
  const add = (event: Event) => {
    event.preventDefault();
    const listId = adding || others[0]?.listId;
    if (!listId) return;
    void change.run(
      async () => {
        await request('POST', `/lists/${listId}/contacts`, { contactIds: [contact.contactId] });
        await props.onChanged();
      },
      `Added to ${names.get(listId) ?? listId}.`,
    );
  };
  return (
    <Part title="Lists" id="contact-lists">
      {contact.listIds.length === 0 ? (
        <p class="muted">In no list.</p>
      ) : (
        <ul class="memberships">
          {contact.listIds.map((id) => (
            <li key={id}>
              <Link href={`/lists/${id}`}>{names.get(id) ?? id}</Link>
              {names.get(id) !== ALL_CONTACTS && (
                <button
                  type="button"
                  class="small"
                  disabled={change.busy}
                  aria-label={`Take off ${names.get(id) ?? id}`}
                  onClick={() => takeOff(id)}
                >
                  Take off
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {others.length > 0 && (
        <form class="inline-form" onSubmit={add} aria-label="Add to a list">
          <label for="add-to-list">Add to list</label>
          <select id="add-to-list" value={adding} onChange={(e) => setAdding(e.currentTarget.value)}>
            {others.map((list) => (
              <option key={list.listId} value={list.listId}>
                {list.name}
              </option>
            ))}
          </select>
          <button type="submit" disabled={change.busy}>
            Add
          </button>
        </form>
      )}
      {change.error && <ErrorMessage error={change.error} />}
      <p role="status" class="notice">
        {change.notice}
      </p>
    </Part>
  );
}

function ContactView(props: {
  contact: Contact;
  lists: ContactList[];
  properties: string[];
  messages: PageOf<ContactMessage>;
}) {
  const [contact, setContact] = useState(props.contact);
  const [deleted, setDeleted] = useState(false);
  const [erased, setErased] = useState<Erasure | null>(null);
  const change = useChange();
  const format = useNumber();
  const person = personOfContact(contact);
  const path = `/contacts/${contact.contactId}`;
  const reread = async () => setContact(await get<Contact>(path));
  const remove = () =>
    change.run(async () => {
      await request('DELETE', path);
      setDeleted(true);
    }, `Contact ${contact.contactId} was deleted.`);
  if (deleted)
    return (
      <Page title="Contact deleted">
        <p role="status" class="notice">
          {change.notice}
        </p>
        <p>
          <Link href="/contacts">Back to the contacts</Link>
        </p>
      </Page>
    );
  if (erased)
    return (
      <Page title="Contact erased">
        <p role="status" class="notice">
          {erasedWords(erased.erased, format)} Contact {contact.contactId} is gone.
        </p>
        <p>
          <Link href="/contacts">Back to the contacts</Link>
        </p>
      </Page>
    );
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
      <ContactLists contact={contact} lists={props.lists} onChanged={reread} />
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
      <Part title="Edit" id="contact-edit">
        <EditContact contact={contact} properties={props.properties} onSaved={setContact} />
      </Part>
      <Part title="Messages" id="contact-messages">
        <Messages contactId={String(contact.contactId)} firstPage={props.messages} />
      </Part>
      <Part title="Delete" id="contact-delete">
        <p>
          The contact leaves its lists; what it was sent stays. A number or address it holds without consent is
          suppressed, so its opt-out is kept.
        </p>
        <Confirm
          label="Delete contact"
          question={`Delete contact ${contact.contactId}? This cannot be undone.`}
          yes="Yes, delete the contact"
          no="Keep the contact"
          busy={change.busy}
          onConfirm={remove}
        />
        {change.error && <ErrorMessage error={change.error} />}
      </Part>
      {person && <PersonRights person={person} onErased={setErased} />}
    </Page>
  );
}

export function ContactPage(props: { contactId: string }) {
  const path = `/contacts/${encodeURIComponent(props.contactId)}`;
  const loaded = useLoad(
    () => Promise.all([get<Contact>(path), listsOf(), propertiesOf(), messagesOf(props.contactId)]),
    path,
  );
  return (
    <Show loaded={loaded}>
      {([contact, lists, properties, messages]) => (
        <ContactView contact={contact} lists={lists} properties={properties} messages={messages} />
      )}
    </Show>
  );
}
