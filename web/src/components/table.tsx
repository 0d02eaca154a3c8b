import type { ComponentChildren } from 'preact';
import type { Pages } from '../load.ts';
import { ErrorMessage } from './states.tsx';

/**
 * A table with its caption, in a wrapper that scrolls sideways on a narrow screen; the wrapper
 * takes the keyboard focus so it can be scrolled without a mouse.
 */
export function Table(props: {
  caption: string;
  head: string[];
  children: ComponentChildren;
  foot?: ComponentChildren;
  empty?: string;
  rows: number;
}) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: focusable so its overflow scrolls from the keyboard
    // biome-ignore lint/a11y/useSemanticElements: it wraps a table, not form controls, so no fieldset
    <div class="table-wrap" tabIndex={0} role="group" aria-label={props.caption}>
      <table>
        <caption>{props.caption}</caption>
        <thead>
          <tr>
            {props.head.map((name) => (
              <th scope="col" key={name}>
                {name}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows === 0 ? (
            <tr>
              <td colSpan={props.head.length} class="muted">
                {props.empty ?? 'Nothing yet.'}
              </td>
            </tr>
          ) : (
            props.children
          )}
        </tbody>
        {props.foot}
      </table>
    </div>
  );
}

/** A paged table: its first page's state, the rows so far, and "Load more" while the API has a next cursor. */
export function PagedTable<T>(props: {
  caption: string;
  head: string[];
  pages: Pages<T>;
  row: (item: T) => ComponentChildren;
  empty?: string;
}) {
  const { pages } = props;
  if (pages.first.state === 'loading')
    return (
      <p class="muted" role="status">
        Loading {props.caption.toLowerCase()}…
      </p>
    );
  if (pages.first.state === 'failed') return <ErrorMessage error={pages.first.error} />;
  return (
    <>
      <Table caption={props.caption} head={props.head} rows={pages.items.length} empty={props.empty}>
        {pages.items.map(props.row)}
      </Table>
      <MoreButton pages={pages} />
    </>
  );
}

export function MoreButton<T>(props: { pages: Pages<T> }) {
  const { pages } = props;
  return (
    <>
      {pages.moreError && <ErrorMessage error={pages.moreError} />}
      {pages.nextCursor !== null && (
        <button type="button" class="more" onClick={pages.loadMore} disabled={pages.loadingMore}>
          {pages.loadingMore ? 'Loading…' : 'Load more'}
        </button>
      )}
    </>
  );
}
