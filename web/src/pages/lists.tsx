import { useState } from 'preact/hooks';
import { get, request, withQuery } from '../api.ts';
import { saveFile } from '../download.ts';
import { contactCsvHeader, contactCsvRow, toCsv } from '../contacts-csv.ts';
import { useLoad, usePages } from '../load.ts';
import { Link, navigate } from '../router.tsx';
import type { Contact, ContactList } from '../types.ts';
import { useChange } from '../components/change.ts';
import { Confirm } from '../components/confirm.tsx';
import { Page, Part } from '../components/page.tsx';
import { ErrorMessage, Show } from '../components/states.tsx';
import { PagedTable, Table } from '../components/table.tsx';
import { Num, Time } from '../components/zone.tsx';
import { ALL_CONTACTS, CONTACT_COLUMNS, ContactRow, listsOf, propertiesOf } from './contacts.tsx';

/** A form of one list name: `submit` is given it trimmed; `done` words the notice after. */
function ListNameForm(props: {
  id: string;
  purpose: string;
  label: string;
  button: string;
  initial: string;
  submit: (name: string) => Promise<void>;
  done: (name: string) => string;
}) {
  const [name, setName] = useState(props.initial);
  const change = useChange();
  const submit = (event: Event) => {
    event.preventDefault();
    const wanted = name.trim();
    void change.run(async () => {
      await props.submit(wanted);
      setName(props.initial === '' ? '' : wanted);
    }, props.done(wanted));
  };
  return (
    <>
      <form class="inline-form" onSubmit={submit} aria-label={props.purpose}>
        <label for={props.id}>{props.label}</label>
        <input
          id={props.id}
          type="text"
          required
          maxLength={100}
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
          autocomplete="off"
        />
        <button type="submit" disabled={change.busy}>
          {props.button}
        </button>
      </form>
      {change.error && <ErrorMessage error={change.error} />}
      <p role="status" class="notice">
        {change.notice}
      </p>
    </>
  );
}

function NewList(props: { onCreated: () => void }) {
  return (
    <ListNameForm
      id="new-list-name"
      purpose="Create a list"
      label="New list's name"
      button="Create list"
      initial=""
      submit={async (name) => {
        await request('POST', '/lists', { name });
        props.onCreated();
      }}
      done={(name) => `The list ${name} is created.`}
    />
  );
}

export function Lists() {
  const lists = useLoad(listsOf, 'lists');
  return (
    <Page
      title="Lists"
      actions={
        <Link href="/contacts/import" class="button">
          Import contacts
        </Link>
      }
    >
      <NewList onCreated={lists.reload} />
      <Show loaded={lists}>
        {(data) => (
          <Table caption="Lists" head={['Name', 'List id', 'Created']} rows={data.length}>
            {data.map((list) => (
              <tr key={list.listId}>
                <td>
                  <Link href={`/lists/${list.listId}`}>{list.name}</Link>
                </td>
                <td class="mono id">{list.listId}</td>
                <td>
                  <Time at={list.createdAt} />
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Show>
    </Page>
  );
}

/** A page of the export: as many as a page of GET /lists/{listId}/contacts holds. */
const EXPORT_PAGE = 1000;

/**
 * The list's contacts as a CSV file, made in the browser from every page of
 * GET /lists/{listId}/contacts, then saved through an object URL: nothing is kept on the server.
 */
function ExportList(props: { list: ContactList }) {
  const [read, setRead] = useState<number | null>(null);
  const change = useChange();
  const exportCsv = () =>
    change.run(async () => {
      const properties = await propertiesOf();
      const rows = [contactCsvHeader(properties)];
      const path = `/lists/${props.list.listId}/contacts`;
      let cursor: string | undefined;
      setRead(0);
      do {
        const page = await get<{ contacts: Contact[]; nextCursor: string | null }>(
          withQuery(path, { limit: EXPORT_PAGE, cursor }),
        );
        for (const contact of page.contacts) rows.push(contactCsvRow(contact, properties));
        setRead(rows.length - 1);
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
      saveFile(toCsv(rows), `${props.list.name}.csv`, 'text/csv;charset=utf-8');
    }, 'The CSV file is saved.');
  return (
    <Part title="Export" id="list-export">
      <p>Every contact of the list, a row each: its fields, then a column for each property.</p>
      <button type="button" onClick={exportCsv} disabled={change.busy}>
        Export CSV
      </button>
      <p role="status" class="muted">
        {read !== null && change.busy && (
          <>
            <Num n={read} /> contacts read…
          </>
        )}
      </p>
      {change.error && <ErrorMessage error={change.error} />}
      <p role="status" class="notice">
        {change.notice && read !== null && (
          <>
            <Num n={read} /> contacts exported. {change.notice}
          </>
        )}
      </p>
    </Part>
  );
}

function RenameList(props: { list: ContactList; onRenamed: (list: ContactList) => void }) {
  return (
    <ListNameForm
      id="list-name"
      purpose="Rename the list"
      label="Name"
      button="Rename list"
      initial={props.list.name}
      submit={async (name) =>
        props.onRenamed(await request<ContactList>('PATCH', `/lists/${props.list.listId}`, { name }))
      }
      done={(name) => `The list is renamed ${name}.`}
    />
  );
}

function ManageList(props: { list: ContactList; onRenamed: (list: ContactList) => void }) {
  const change = useChange();
  if (props.list.name === ALL_CONTACTS)
    return (
      <Part title="Manage" id="list-manage">
        <p class="muted">All contacts is every contact of the account: it cannot be renamed, deleted or left.</p>
      </Part>
    );
  const remove = () =>
    change.run(async () => {
      await request('DELETE', `/lists/${props.list.listId}`);
      navigate('/lists');
    }, 'The list is deleted.');
  return (
    <Part title="Manage" id="list-manage">
      <RenameList list={props.list} onRenamed={props.onRenamed} />
      <p>
        Deleting a list takes its memberships, never its contacts. A list that a scheduled or unfinished send names
        cannot be deleted until the send is cancelled or started.
      </p>
      <Confirm
        label="Delete list"
        question={`Delete the list ${props.list.name}? Its contacts stay.`}
        yes="Yes, delete the list"
        no="Keep the list"
        busy={change.busy}
        onConfirm={remove}
      />
      {change.error && <ErrorMessage error={change.error} />}
    </Part>
  );
}

export function ListPage(props: { listId: string }) {
  const path = `/lists/${encodeURIComponent(props.listId)}/contacts`;
  const lists = useLoad(listsOf, 'lists');
  const [renamed, setRenamed] = useState<ContactList | null>(null);
  const pages = usePages(
    (cursor) =>
      get<{ contacts: Contact[]; nextCursor: string | null }>(withQuery(path, { cursor, limit: 50 })).then((page) => ({
        items: page.contacts,
        nextCursor: page.nextCursor,
      })),
    path,
  );
  const list =
    renamed ?? (lists.state === 'done' ? lists.data.find((l) => l.listId === props.listId.toLowerCase()) : undefined);
  return (
    <Show loaded={pages.first}>
      {() => (
        <Page title={list === undefined ? 'List' : `List ${list.name}`}>
          <PagedTable
            caption="Contacts of the list"
            head={CONTACT_COLUMNS}
            pages={pages}
            row={(c) => <ContactRow key={c.contactId} contact={c} />}
            empty="The list has no contacts."
          />
          {list && <ExportList list={list} />}
          {list && <ManageList list={list} onRenamed={setRenamed} />}
        </Page>
      )}
    </Show>
  );
}
