import type { ComponentChildren } from 'preact';
import { useEffect } from 'preact/hooks';

/** A page: its one h1 (the target of focus after a navigation, see app.tsx) and the document's title. */
export function Page(props: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  useEffect(() => {
    document.title = `${props.title} · Herald console`;
  }, [props.title]);
  return (
    <section aria-labelledby="page-title">
      <div class="page-head">
        <h1 id="page-title" tabIndex={-1}>
          {props.title}
        </h1>
        {props.actions}
      </div>
      {props.children}
    </section>
  );
}

/** A labelled part of a page, for a heading below the page's h1. */
export function Part(props: { title: string; id: string; children: ComponentChildren }) {
  return (
    <section aria-labelledby={props.id} class="part">
      <h2 id={props.id}>{props.title}</h2>
      {props.children}
    </section>
  );
}
