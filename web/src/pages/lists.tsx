import { get, withQuery } from '../api.ts';
import { useLoad, usePages } from '../load.ts';
import { Link } from '../router.tsx';
import type { Contact } from '../types.ts';
import { Page } from '../components/page.tsx';
import { Show } from '../components/states.tsx';
import { PagedTable, Table } from '../components/table.tsx';
import { Time } from '../components/zone.tsx';
import { CONTACT_COLUMNS, ContactRow, listsOf } from './contacts.tsx';

export function Lists() {
  const lists = useLoad(listsOf, 'lists');
  return (
    <Page title="Lists">
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

export function ListPage(props: { listId: string }) {
  const path = `/lists/${encodeURIComponent(props.listId)}/contacts`;
  const lists = useLoad(listsOf, 'lists');
  const pages = usePages(
    (cursor) =>
      get<{ contacts: Contact[]; nextCursor: string | null }>(withQuery(path, { cursor, limit: 50 })).then((page) => ({
        items: page.contacts,
        nextCursor: page.nextCursor,
      })),
    path,
  );
  const name =
    lists.state === 'done' ? lists.data.find((list) => list.listId === props.listId.toLowerCase())?.name : undefined;
  return (
    <Show loaded={pages.first}>
      {() => (
        <Page title={name === undefined ? 'List' : `List ${name}`}>
          <PagedTable
            caption="Contacts of the list"
            head={CONTACT_COLUMNS}
            pages={pages}
            row={(c) => <ContactRow key={c.contactId} contact={c} />}
            empty="The list has no contacts."
          />
        </Page>
      )}
    </Show>
  );
}
