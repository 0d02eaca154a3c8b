import { useEffect, useRef, useState } from 'preact/hooks';
import { get, request } from '../api.ts';
import { SCOPES } from '../integrations.ts';
import { useLoad } from '../load.ts';
import { addDays, dayStart, localDate } from '../time.ts';
import type { ApiKey, CreatedApiKey } from '../types.ts';
import { useChange } from '../components/change.ts';
import { Confirm } from '../components/confirm.tsx';
import { Choices, Field, PasswordAgain, problemOf } from '../components/field.tsx';
import { Page, Part } from '../components/page.tsx';
import { ErrorMessage, Show } from '../components/states.tsx';
import { Table } from '../components/table.tsx';
import { Time, useZone } from '../components/zone.tsx';

const keysOf = () => get<{ apiKeys: ApiKey[] }>('/api-keys').then((answer) => answer.apiKeys);

/**
 * The key just made, shown this once in a read-only field (selected whole by a click) with a
 * Copy button where the browser has a clipboard. It takes the focus, so a screen reader reads
 * the warning with it.
 */
function NewKey(props: { created: CreatedApiKey; onDone: () => void }) {
  const field = useRef<HTMLInputElement>(null);
  const [outcome, setOutcome] = useState('');
  useEffect(() => {
    field.current?.focus();
    field.current?.select();
  }, [props.created.apiKeyId]);
  const copy = () =>
    navigator.clipboard.writeText(props.created.key).then(
      () => setOutcome('Copied.'),
      () => setOutcome('Not copied: select the key and copy it.'),
    );
  return (
    <Part title={`New key ${props.created.name}`} id="new-key">
      <p class="warning" id="new-key-once">
        Copy the key now: you will not see it again. Herald keeps only its hash; a lost key is revoked and made again.
      </p>
      <div class="field">
        <label for="new-key-value">API key {props.created.name}</label>
        <input
          id="new-key-value"
          ref={field}
          class="mono secret-field"
          type="text"
          readOnly
          value={props.created.key}
          aria-describedby="new-key-once"
          onFocus={(e) => e.currentTarget.select()}
          autocomplete="off"
          spellcheck={false}
        />
      </div>
      <p>
        {window.isSecureContext && 'clipboard' in navigator && (
          <button type="button" onClick={copy}>
            Copy the key
          </button>
        )}{' '}
        <button type="button" onClick={props.onDone}>
          I have copied it: hide the key
        </button>
      </p>
      <p role="status" class="notice">
        {outcome}
      </p>
    </Part>
  );
}

/** POST /api-keys: under the console's session the account's password is asked for again. */
function CreateKey(props: { onCreated: (created: CreatedApiKey) => void }) {
  const zone = useZone();
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>([]);
  const [expires, setExpires] = useState('');
  const [password, setPassword] = useState('');
  const change = useChange();
  const problem = (field: string) => problemOf(change, field);
  const submit = (event: Event) => {
    event.preventDefault();
    const body = {
      name: name.trim(),
      scopes,
      ...(expires === '' ? {} : { expiresAt: new Date(dayStart(expires, zone)).toISOString() }),
      password,
    };
    void change.run(async () => {
      const created = await request<CreatedApiKey>('POST', '/api-keys', body);
      setName('');
      setScopes([]);
      setExpires('');
      props.onCreated(created);
    }, `The key ${body.name} is created.`);
    // The password is not kept in the page, whatever the answer.
    setPassword('');
  };
  return (
    <Part title="Create a key" id="create-key">
      <form class="edit-form" onSubmit={submit} noValidate aria-label="Create an API key">
        <Field
          id="key-name"
          label="Name"
          value={name}
          maxLength={100}
          required
          onInput={setName}
          problem={problem('name')}
        />
        <Choices
          id="key-scopes"
          legend="Scopes: what the key may do"
          choices={SCOPES}
          chosen={scopes}
          onChange={setScopes}
          problem={problem('scopes')}
        />
        <Field
          id="key-expires"
          label={`Expires on (optional; from the start of that day, ${zone.label})`}
          input={{ type: 'date', min: addDays(localDate(Date.now(), zone), 1) }}
          value={expires}
          onInput={setExpires}
          problem={problem('expiresAt')}
        />
        <PasswordAgain
          id="key-password"
          to="create a key"
          value={password}
          onInput={setPassword}
          problem={problem('password')}
        />
        <p>
          <button type="submit" disabled={change.busy}>
            Create key
          </button>
        </p>
        {change.error && <ErrorMessage error={change.error} />}
      </form>
    </Part>
  );
}

function RevokeKey(props: { apiKey: ApiKey; onRevoked: () => void }) {
  const change = useChange();
  const { apiKey } = props;
  const revoke = () =>
    change.run(async () => {
      await request('DELETE', `/api-keys/${apiKey.apiKeyId}`);
      props.onRevoked();
    }, `The key ${apiKey.name} is revoked.`);
  return (
    <>
      <Confirm
        label="Revoke"
        name={`Revoke ${apiKey.name}`}
        question={`Revoke the key ${apiKey.name}? Whatever uses it is refused from its next request.`}
        yes="Yes, revoke the key"
        no="Keep the key"
        busy={change.busy}
        onConfirm={revoke}
      />
      {change.error && <ErrorMessage error={change.error} />}
    </>
  );
}

function Expires(props: { at: string | null }) {
  if (props.at === null) return <span>Never</span>;
  return (
    <>
      <Time at={props.at} />
      {Date.parse(props.at) <= Date.now() && <strong> (expired)</strong>}
    </>
  );
}

/** API keys (docs/api-keys.md): the account's keys with their last use, one made, one revoked. */
export function ApiKeys() {
  const keys = useLoad(keysOf, 'api-keys');
  const [created, setCreated] = useState<CreatedApiKey | null>(null);
  const [notice, setNotice] = useState('');
  const made = (key: CreatedApiKey) => {
    setCreated(key);
    setNotice('');
    keys.reload();
  };
  const revoked = (key: ApiKey) => () => {
    setNotice(`The key ${key.name} is revoked.`);
    keys.reload();
  };
  return (
    <Page title="API keys">
      <p>
        An integration signs in with a key of its own (<code>Authorization: Bearer hk_…</code>), limited to the scopes
        it was given. A key never manages keys. Changing the password or the private token leaves keys as they are.
      </p>
      {created && <NewKey created={created} onDone={() => setCreated(null)} />}
      <Part title="Keys" id="keys">
        <p role="status" class="notice">
          {notice}
        </p>
        <Show loaded={keys}>
          {(data) => (
            <Table
              caption="API keys"
              head={['Name', 'Scopes', 'Created', 'Expires', 'Last used', 'Action']}
              rows={data.length}
              empty="The account has no API key."
            >
              {data.map((key) => (
                <tr key={key.apiKeyId}>
                  <td>{key.name}</td>
                  <td>
                    {key.scopes.map((scope) => (
                      <code key={scope} class="scope">
                        {scope}
                      </code>
                    ))}
                  </td>
                  <td>
                    <Time at={key.createdAt} />
                  </td>
                  <td>
                    <Expires at={key.expiresAt} />
                  </td>
                  <td>{key.lastUsedAt === null ? 'Never' : <Time at={key.lastUsedAt} />}</td>
                  <td>
                    <RevokeKey apiKey={key} onRevoked={revoked(key)} />
                  </td>
                </tr>
              ))}
            </Table>
          )}
        </Show>
      </Part>
      <CreateKey onCreated={made} />
    </Page>
  );
}
