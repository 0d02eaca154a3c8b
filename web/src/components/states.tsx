import type { ComponentChildren } from 'preact';
import { ApiError } from '../api.ts';
import type { Loaded } from '../load.ts';

export function NotFound() {
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Not found</h1>
      <p>There is nothing here, or it belongs to another account.</p>
    </section>
  );
}

export function ErrorMessage(props: { error: Error }) {
  return (
    <p role="alert" class="error">
      {props.error.message}
    </p>
  );
}

/** What a load shows until its data is there: a line while loading, "Not found" for a 404, the error otherwise. */
export function Show<T>(props: { loaded: Loaded<T>; children: (data: T) => ComponentChildren }) {
  const { loaded } = props;
  if (loaded.state === 'loading')
    return (
      <p class="muted" role="status">
        Loading…
      </p>
    );
  if (loaded.state === 'failed')
    return loaded.error instanceof ApiError && loaded.error.status === 404 ? (
      <NotFound />
    ) : (
      <ErrorMessage error={loaded.error} />
    );
  return <>{props.children(loaded.data)}</>;
}
