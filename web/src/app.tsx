import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { request, setCsrfToken, whenSignedOut } from './api.ts';
import { Link, match, useLocation } from './router.tsx';
import { zoneOf } from './time.ts';
import type { Session } from './types.ts';
import { NotFound } from './components/states.tsx';
import { ZoneContext } from './components/zone.tsx';
import { ContactPage } from './pages/contact.tsx';
import { Contacts } from './pages/contacts.tsx';
import { ImportContacts } from './pages/import.tsx';
import { EmailBatches, EmailBatchPage } from './pages/email.tsx';
import { ListPage, Lists } from './pages/lists.tsx';
import { Overview } from './pages/overview.tsx';
import { SignIn } from './pages/sign-in.tsx';
import { SmsSendPage, SmsSends } from './pages/sms.tsx';
import { Suppressions } from './pages/suppressions.tsx';
import { Usage } from './pages/usage.tsx';
import { ApiKeys } from './pages/api-keys.tsx';
import { Audit } from './pages/audit.tsx';
import { Verify } from './pages/verify.tsx';
import { DeliveryPage, Webhooks } from './pages/webhooks.tsx';

type Params = Record<string, string>;

/** The console's pages by path under /console; the key makes a page start afresh for another id. */
const ROUTES: Array<[string, (p: Params) => JSX.Element]> = [
  ['/', () => <Overview />],
  ['/sms', () => <SmsSends />],
  ['/sms/:queueId', (p) => <SmsSendPage key={p.queueId} queueId={p.queueId} />],
  ['/email', () => <EmailBatches />],
  ['/email/:batchId', (p) => <EmailBatchPage key={p.batchId} batchId={p.batchId} />],
  ['/verify', () => <Verify />],
  ['/contacts', () => <Contacts />],
  ['/contacts/import', () => <ImportContacts />],
  ['/contacts/:contactId', (p) => <ContactPage key={p.contactId} contactId={p.contactId} />],
  ['/lists', () => <Lists />],
  ['/lists/:listId', (p) => <ListPage key={p.listId} listId={p.listId} />],
  ['/suppressions', () => <Suppressions />],
  ['/webhooks', () => <Webhooks />],
  ['/webhooks/:id', (p) => <DeliveryPage key={p.id} id={p.id} />],
  ['/usage', () => <Usage />],
  ['/api-keys', () => <ApiKeys />],
  ['/audit', () => <Audit />],
];

const NAV: Array<[string, string]> = [
  ['/', 'Overview'],
  ['/sms', 'SMS'],
  ['/email', 'Email'],
  ['/verify', 'Verify'],
  ['/contacts', 'Contacts'],
  ['/lists', 'Lists'],
  ['/suppressions', 'Suppressions'],
  ['/webhooks', 'Webhooks'],
  ['/usage', 'Usage'],
  ['/api-keys', 'API keys'],
  ['/audit', 'Audit log'],
];

function route(path: string): JSX.Element {
  for (const [pattern, page] of ROUTES) {
    const params = match(pattern, path);
    if (params) return page(params);
  }
  return <NotFound />;
}

const section = (path: string) => `/${path.split('/')[1] ?? ''}`;

function Layout(props: {
  session: Session;
  zoneLabel: string;
  onSignOut: () => void;
  path: string;
  children: ComponentChildren;
}) {
  const main = useRef<HTMLElement>(null);
  const first = useRef(true);
  // After a navigation, focus goes to the new page's heading, as a page load would take it to the top.
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    main.current?.querySelector<HTMLElement>('h1')?.focus();
  }, [props.path]);
  return (
    <>
      <a class="skip" href="#main">
        Skip to the page
      </a>
      <header class="top">
        <span class="brand">Herald</span>
        <nav aria-label="Console">
          <ul>
            {NAV.map(([href, name]) => (
              <li key={href}>
                <Link href={href} aria-current={section(props.path) === href ? 'page' : undefined}>
                  {name}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          {props.session.userName}
          <small>Times in {props.zoneLabel}</small>
        </span>
        <button type="button" onClick={props.onSignOut}>
          Sign out
        </button>
      </header>
      <main id="main" ref={main}>
        {props.children}
      </main>
    </>
  );
}

/** Signed in or not (GET /console/session at load), then the page of the URL. */
export function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const { path } = useLocation();
  const signedIn = (next: Session | null) => {
    setCsrfToken(next?.csrfToken ?? null);
    setSession(next);
  };
  useEffect(() => {
    whenSignedOut(() => signedIn(null));
    request<Session>('GET', '/console/session', undefined, { session: true }).then(signedIn, () => signedIn(null));
  }, []);
  const zone = useMemo(() => (session ? zoneOf(session.timeZoneOffset, session.locale) : null), [session]);

  if (session === undefined)
    return (
      <p class="muted" role="status">
        Loading…
      </p>
    );
  if (session === null || zone === null) return <SignIn onSignedIn={signedIn} />;
  const signOut = () => request('DELETE', '/console/session').finally(() => signedIn(null));
  return (
    <ZoneContext.Provider value={zone}>
      <Layout session={session} zoneLabel={zone.label} onSignOut={signOut} path={path}>
        {route(path)}
      </Layout>
    </ZoneContext.Provider>
  );
}
