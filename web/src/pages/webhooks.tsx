import { useState } from 'preact/hooks';
import { get, request, withQuery } from '../api.ts';
import { useLoad, usePages } from '../load.ts';
import { IdLink } from '../router.tsx';
import { ENDPOINT_EVENTS } from '../integrations.ts';
import type { Delivery, WebhookEndpoint, WebhookSecret } from '../types.ts';
import { useChange } from '../components/change.ts';
import { Confirm } from '../components/confirm.tsx';
import { Choices, Field, PasswordAgain, problemOf } from '../components/field.tsx';
import { Page, Part } from '../components/page.tsx';
import { ErrorMessage, Show } from '../components/states.tsx';
import { Status } from '../components/status.tsx';
import { PagedTable, Table } from '../components/table.tsx';
import { CopyId } from '../components/copy-id.tsx';
import { Num, Time } from '../components/zone.tsx';

export const deliveriesPage = (cursor: string | undefined, limit = 50, failing?: boolean) =>
  get<{ deliveries: Delivery[]; nextCursor: string | null }>(
    withQuery('/webhooks/deliveries', { cursor, limit, failing: failing ? 'true' : undefined }),
  ).then((page) => ({ items: page.deliveries, nextCursor: page.nextCursor }));

const outcome = (d: Delivery) =>
  [d.lastStatusCode === null ? null : `HTTP ${d.lastStatusCode}`, d.lastError].filter(Boolean).join(': ') || '—';

export const DELIVERY_COLUMNS = ['Delivery', 'Type', 'URL', 'Status', 'Attempts', 'Last outcome', 'Last attempt'];

export function DeliveryCells(props: { delivery: Delivery }) {
  const d = props.delivery;
  return (
    <>
      <td>
        <IdLink href={`/webhooks/${d.id}`} id={d.id} />
      </td>
      <td>{d.type}</td>
      <td class="mono wrap">{d.url}</td>
      <td>
        <Status word={d.status} />
      </td>
      <td>
        <Num n={d.attempts} />
      </td>
      <td>{outcome(d)}</td>
      <td>
        <Time at={d.lastAttemptAt} />
      </td>
    </>
  );
}

function SecretPart() {
  const secret = useLoad(() => get<WebhookSecret>('/webhooks/secret'), 'secret');
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<Error | null>(null);
  const [notice, setNotice] = useState('');
  const rotate = async () => {
    setError(null);
    try {
      await request('POST', '/webhooks/secret/rotate');
      setConfirming(false);
      setNotice('The secret was rotated. The previous one keeps signing for 24 hours.');
      secret.reload();
    } catch (failure) {
      setError(failure as Error);
    }
  };
  return (
    <Part title="Signing secret" id="secret">
      <Show loaded={secret}>
        {(data) => (
          <dl class="facts">
            <dt>Secret</dt>
            <dd>
              <code class="secret">{data.secret}</code>
            </dd>
            <dt>Previous secret signs until</dt>
            <dd>
              <Time at={data.previousSecretExpiresAt} />
            </dd>
          </dl>
        )}
      </Show>
      {confirming ? (
        <fieldset class="confirm" aria-label="Confirm the rotation">
          <p>Receivers must verify with the new secret within 24 hours. Rotate now?</p>
          <button type="button" class="danger" onClick={rotate}>
            Yes, rotate the secret
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Keep the current secret
          </button>
        </fieldset>
      ) : (
        <button type="button" onClick={() => setConfirming(true)}>
          Rotate secret
        </button>
      )}
      {error && <ErrorMessage error={error} />}
      <p role="status" class="notice">
        {notice}
      </p>
    </Part>
  );
}

/** POST /webhooks/endpoints: under the console's session the account's password is asked for again. */
function AddEndpoint(props: { onAdded: (endpoint: WebhookEndpoint) => void }) {
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>([]);
  const [password, setPassword] = useState('');
  const change = useChange();
  const problem = (field: string) => problemOf(change, field);
  const add = (event: Event) => {
    event.preventDefault();
    const body = { url: url.trim(), events, password };
    void change.run(async () => {
      const added = await request<WebhookEndpoint>('POST', '/webhooks/endpoints', body);
      setUrl('');
      setEvents([]);
      props.onAdded(added);
    }, `${body.url} is added.`);
    // The password is not kept in the page, whatever the answer.
    setPassword('');
  };
  return (
    <form class="edit-form" onSubmit={add} noValidate aria-label="Add a webhook endpoint">
      <Field
        id="endpoint-url"
        label="URL (http or https)"
        input={{ type: 'url' }}
        value={url}
        maxLength={2048}
        required
        onInput={setUrl}
        problem={problem('url')}
      />
      <Choices
        id="endpoint-events"
        legend="Events posted there"
        choices={ENDPOINT_EVENTS}
        chosen={events}
        onChange={setEvents}
        problem={problem('events')}
      />
      <PasswordAgain
        id="endpoint-password"
        to="add an endpoint"
        value={password}
        onInput={setPassword}
        problem={problem('password')}
      />
      <p>
        <button type="submit" disabled={change.busy}>
          Add endpoint
        </button>
      </p>
      {change.error && <ErrorMessage error={change.error} />}
      <p role="status" class="notice">
        {change.notice}
      </p>
    </form>
  );
}

function DeleteEndpoint(props: { endpoint: WebhookEndpoint; onDeleted: () => void }) {
  const change = useChange();
  const { endpoint } = props;
  const remove = () =>
    change.run(async () => {
      await request('DELETE', `/webhooks/endpoints/${endpoint.endpointId}`);
      props.onDeleted();
    }, `${endpoint.url} is deleted.`);
  return (
    <>
      <Confirm
        label="Delete"
        name={`Delete ${endpoint.url}`}
        question={`Stop posting to ${endpoint.url}? Events already gathered for it are still posted.`}
        yes="Yes, delete the endpoint"
        no="Keep the endpoint"
        busy={change.busy}
        onConfirm={remove}
      />
      {change.error && <ErrorMessage error={change.error} />}
    </>
  );
}

/** The URLs every event of some types is posted to (docs/api.md, "Webhook endpoints"). */
function EndpointsPart() {
  const endpoints = useLoad(
    () => get<{ endpoints: WebhookEndpoint[] }>('/webhooks/endpoints').then((answer) => answer.endpoints),
    'endpoints',
  );
  const [notice, setNotice] = useState('');
  return (
    <Part title="Endpoints" id="endpoints">
      <p>
        Every event of the types chosen is posted to the endpoint's URL, signed with the secret above, besides any URL a
        request names. At most 10 endpoints, one per URL; to change an endpoint's events, delete it and add it again.
      </p>
      <p role="status" class="notice">
        {notice}
      </p>
      <Show loaded={endpoints}>
        {(data) => (
          <Table
            caption="Webhook endpoints, oldest first"
            head={['URL', 'Events', 'Created', 'State', 'Action']}
            rows={data.length}
            empty="No endpoint: events go only to the URLs requests name."
          >
            {data.map((endpoint) => (
              <tr key={endpoint.endpointId}>
                <td class="mono wrap">{endpoint.url}</td>
                <td>
                  {endpoint.events.map((name) => (
                    <code key={name} class="scope">
                      {name}
                    </code>
                  ))}
                </td>
                <td>
                  <Time at={endpoint.createdAt} />
                </td>
                <td>
                  {endpoint.disabledAt === null ? (
                    'Takes events'
                  ) : (
                    <>
                      Disabled <Time at={endpoint.disabledAt} />: its receiver answered 410 Gone. Delete it and add it
                      again to take events there anew.
                    </>
                  )}
                </td>
                <td>
                  <DeleteEndpoint
                    endpoint={endpoint}
                    onDeleted={() => {
                      setNotice(`${endpoint.url} is deleted.`);
                      endpoints.reload();
                    }}
                  />
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Show>
      <h3>Add an endpoint</h3>
      <AddEndpoint
        onAdded={() => {
          setNotice('');
          endpoints.reload();
        }}
      />
    </Part>
  );
}

export function Webhooks() {
  const pages = usePages((cursor) => deliveriesPage(cursor), 'deliveries');
  const [error, setError] = useState<Error | null>(null);
  const [notice, setNotice] = useState('');
  const retry = async (id: string) => {
    setError(null);
    try {
      await request('POST', `/webhooks/deliveries/${id}/retry`);
      setNotice(`Delivery ${id} is posted again.`);
      pages.reload();
    } catch (failure) {
      setError(failure as Error);
    }
  };
  return (
    <Page title="Webhooks">
      <SecretPart />
      <EndpointsPart />
      <Part title="Deliveries" id="deliveries">
        {error && <ErrorMessage error={error} />}
        <p role="status" class="notice">
          {notice}
        </p>
        <PagedTable
          caption="Webhook deliveries, newest first"
          head={[...DELIVERY_COLUMNS, 'Action']}
          pages={pages}
          empty="No webhook was posted yet."
          row={(d) => (
            <tr key={d.id}>
              <DeliveryCells delivery={d} />
              <td>
                <button type="button" class="small" aria-label={`Retry delivery ${d.id}`} onClick={() => retry(d.id)}>
                  Retry
                </button>
              </td>
            </tr>
          )}
        />
      </Part>
    </Page>
  );
}

export function DeliveryPage(props: { id: string }) {
  const path = `/webhooks/deliveries/${encodeURIComponent(props.id)}`;
  const delivery = useLoad(() => get<Delivery & { payload: unknown }>(path), path);
  return (
    <Show loaded={delivery}>
      {(d) => (
        <Page title="Webhook delivery">
          <dl class="facts">
            <dt>Id (webhook-id header)</dt>
            <dd>
              <CopyId id={d.id} name="delivery id" />
            </dd>
            <dt>Type</dt>
            <dd>{d.type}</dd>
            <dt>URL</dt>
            <dd class="mono wrap">{d.url}</dd>
            <dt>Status</dt>
            <dd>
              <Status word={d.status} />
            </dd>
            <dt>Attempts</dt>
            <dd>
              <Num n={d.attempts} />
            </dd>
            <dt>Last outcome</dt>
            <dd>{outcome(d)}</dd>
            <dt>Last attempt</dt>
            <dd>
              <Time at={d.lastAttemptAt} />
            </dd>
            <dt>Next attempt</dt>
            <dd>
              <Time at={d.nextAttemptAt} />
            </dd>
            <dt>Created</dt>
            <dd>
              <Time at={d.createdAt} />
            </dd>
            <dt>Delivered</dt>
            <dd>
              <Time at={d.deliveredAt} />
            </dd>
          </dl>
          <Part title="Body" id="payload">
            {/* biome-ignore lint/a11y/noNoninteractiveTabindex: focusable so its overflow scrolls from the keyboard */}
            <pre class="payload" tabIndex={0}>
              {JSON.stringify(d.payload, null, 2)}
            </pre>
          </Part>
        </Page>
      )}
    </Show>
  );
}
