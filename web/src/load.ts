import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import type { Page } from './types.ts';

export type Loaded<T> = { state: 'loading' } | { state: 'failed'; error: Error } | { state: 'done'; data: T };

/**
 * Runs `load` when `key` changes (the page's URL, a query); `reload` runs it again. A late answer
 * for an old key is dropped. Given `ready` (loaded with the page around it), it starts done
 * with that and loads only on a new key or a reload.
 */
export function useLoad<T>(
  load: () => Promise<T>,
  key: string,
  ready?: { data: T },
): Loaded<T> & { reload: () => void } {
  const [loaded, setLoaded] = useState<Loaded<T>>(ready ? { state: 'done', data: ready.data } : { state: 'loading' });
  const [round, setRound] = useState(0);
  const skipFirst = useRef(ready !== undefined);
  useEffect(() => {
    if (skipFirst.current) {
      skipFirst.current = false;
      return;
    }
    let current = true;
    setLoaded({ state: 'loading' });
    load().then(
      (data) => current && setLoaded({ state: 'done', data }),
      (error: Error) => current && setLoaded({ state: 'failed', error }),
    );
    return () => {
      current = false;
    };
  }, [key, round]);
  return { ...loaded, reload: useCallback(() => setRound((n) => n + 1), []) };
}

export interface Pages<T> {
  items: T[];
  nextCursor: string | null;
  /** The first page is loading, or failed. */
  first: Loaded<null>;
  loadingMore: boolean;
  moreError: Error | null;
  loadMore(): void;
  /** Starts again from the first page (after a change). */
  reload(): void;
}

/**
 * A table's rows, a page at a time by the API's cursors ("Load more"): never the whole list.
 * `fetchPage(undefined)` is the first page; `firstPage`, when the page around the table loaded
 * it already, so that the table does not grow under what follows it after the page is shown.
 */
export function usePages<T>(
  fetchPage: (cursor: string | undefined) => Promise<Page<T>>,
  key: string,
  firstPage?: Page<T>,
): Pages<T> {
  const [items, setItems] = useState<T[]>(firstPage?.items ?? []);
  const [nextCursor, setNextCursor] = useState<string | null>(firstPage?.nextCursor ?? null);
  const [loadingMore, setLoadingMore] = useState(false);
  const [moreError, setMoreError] = useState<Error | null>(null);
  const generation = useRef(0);
  const first = useLoad(
    async () => {
      const mine = ++generation.current;
      const page = await fetchPage(undefined);
      if (mine === generation.current) {
        setItems(page.items);
        setNextCursor(page.nextCursor);
        setMoreError(null);
      }
      return null;
    },
    key,
    firstPage && { data: null },
  );
  const loadMore = () => {
    if (nextCursor === null || loadingMore) return;
    const mine = generation.current;
    setLoadingMore(true);
    fetchPage(nextCursor).then(
      (page) => {
        if (mine !== generation.current) return;
        setItems((shown) => [...shown, ...page.items]);
        setNextCursor(page.nextCursor);
        setMoreError(null);
        setLoadingMore(false);
      },
      (error: Error) => {
        setMoreError(error);
        setLoadingMore(false);
      },
    );
  };
  return { items, nextCursor, first, loadingMore, moreError, loadMore, reload: first.reload };
}
