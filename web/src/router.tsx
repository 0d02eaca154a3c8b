import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/**
 * History routing under /console/: the server answers index.html for every /console/… path,
 * so a page's URL can be reloaded or shared.
 */
export const BASE = '/console';

const NAVIGATED = 'console:navigate';

/** The path inside the console: `/sms/<queueId>` for /console/sms/<queueId>. */
function currentPath(): string {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname;
  return path === '' ? '/' : path;
}

export function navigate(path: string): void {
  history.pushState(null, '', BASE + path);
  dispatchEvent(new Event(NAVIGATED));
}

export function useLocation(): { path: string; query: URLSearchParams } {
  const read = () => ({ path: currentPath(), query: new URLSearchParams(location.search) });
  const [where, setWhere] = useState(read);
  useEffect(() => {
    const update = () => setWhere(read());
    addEventListener('popstate', update);
    addEventListener(NAVIGATED, update);
    return () => {
      removeEventListener('popstate', update);
      removeEventListener(NAVIGATED, update);
    };
  }, []);
  return where;
}

/** The parameters of `pattern` (`/sms/:queueId`) in `path`, or null when it does not match. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split('/').filter(Boolean);
  const have = path.split('/').filter(Boolean);
  if (want.length !== have.length) return null;
  const params: Record<string, string> = {};
  for (const [i, part] of want.entries()) {
    if (part.startsWith(':')) params[part.slice(1)] = decodeURIComponent(have[i]);
    else if (part !== have[i]) return null;
  }
  return params;
}

/** A link inside the console: a plain <a> (open in a new tab works), followed without a reload. */
export function Link(props: {
  href: string;
  children: ComponentChildren;
  class?: string;
  title?: string;
  'aria-current'?: 'page';
}) {
  const follow = (event: MouseEvent) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(props.href);
    scrollTo(0, 0);
  };
  return (
    <a
      href={BASE + props.href}
      onClick={follow}
      class={props.class}
      title={props.title}
      aria-current={props['aria-current']}
    >
      {props.children}
    </a>
  );
}

/** A link to an object by its UUID, shown whole: what support and the API are given. */
export function IdLink(props: { href: string; id: string }) {
  return (
    <Link href={props.href} class="mono id">
      {props.id}
    </Link>
  );
}
