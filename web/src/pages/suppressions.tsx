import type { InputHTMLAttributes } from 'preact';
import { useState } from 'preact/hooks';
import { get, request, withQuery } from '../api.ts';
import { usePages } from '../load.ts';
import type { Suppression } from '../types.ts';
import { Page, Part } from '../components/page.tsx';
import { ErrorMessage } from '../components/states.tsx';
import { PagedTable } from '../components/table.tsx';
import { Time } from '../components/zone.tsx';

/** What differs between the two channels' suppressions: their path, the address's field and how it is typed. */
interface Kind {
  name: string;
  path: string;
  field: 'number' | 'email';
  label: string;
  input: InputHTMLAttributes<HTMLInputElement>;
  clean: (typed: string) => string;
}

const SMS: Kind = {
  name: 'SMS',
  path: '/sms/suppressions',
  field: 'number',
  label: 'Number (country code and number, digits)',
  input: { type: 'tel', inputMode: 'numeric' },
  clean: (typed) => typed.replace(/\D/g, ''),
};
const EMAIL: Kind = {
  name: 'Email',
  path: '/email/suppressions',
  field: 'email',
  label: 'Email address',
  input: { type: 'email' },
  clean: (typed) => typed.trim(),
};

type Row = Suppression & { number?: string; email?: string };

function SuppressionList(props: { kind: Kind }) {
  const { kind } = props;
  const pages = usePages(
    (cursor) =>
      get<{ suppressions: Row[]; nextCursor: string | null }>(withQuery(kind.path, { cursor, limit: 50 })).then(
        (page) => ({ items: page.suppressions, nextCursor: page.nextCursor }),
      ),
    kind.path,
  );
  const [address, setAddress] = useState('');
  const [reason, setReason] = useState('');
  const [error, setError] = useState<Error | null>(null);
  const [notice, setNotice] = useState('');
  const [busy, setBusy] = useState(false);
  const id = `suppress-${kind.field}`;

  const change = async (work: () => Promise<unknown>, done: string) => {
    setBusy(true);
    setError(null);
    setNotice('');
    try {
      await work();
      setNotice(done);
      pages.reload();
    } catch (failure) {
      setError(failure as Error);
    } finally {
      setBusy(false);
    }
  };
  const add = (event: Event) => {
    event.preventDefault();
    const value = kind.clean(address);
    void change(async () => {
      await request('POST', kind.path, {
        [kind.field]: value,
        ...(reason.trim() === '' ? {} : { reason: reason.trim() }),
      });
      setAddress('');
      setReason('');
    }, `${value} is suppressed.`);
  };
  const remove = (value: string) =>
    change(() => request('DELETE', `${kind.path}/${encodeURIComponent(value)}`), `${value} is no longer suppressed.`);

  return (
    <Part title={`${kind.name} suppressions`} id={`${kind.field}-suppressions`}>
      <form class="inline-form" onSubmit={add} aria-label={`Add an ${kind.name} suppression`}>
        <label for={`${id}-address`}>{kind.label}</label>
        <input
          id={`${id}-address`}
          {...kind.input}
          required
          value={address}
          onInput={(e) => setAddress(e.currentTarget.value)}
          autocomplete="off"
        />
        <label for={`${id}-reason`}>Reason (optional)</label>
        <input
          id={`${id}-reason`}
          type="text"
          maxLength={200}
          value={reason}
          onInput={(e) => setReason(e.currentTarget.value)}
        />
        <button type="submit" disabled={busy}>
          Add suppression
        </button>
      </form>
      {error && <ErrorMessage error={error} />}
      <p role="status" class="notice">
        {notice}
      </p>
      <PagedTable
        caption={`Suppressed ${kind.name === 'SMS' ? 'numbers' : 'addresses'}`}
        head={[kind.name === 'SMS' ? 'Number' : 'Address', 'Reason', 'Since', 'Action']}
        pages={pages}
        empty="None."
        row={(row) => {
          const value = row[kind.field] ?? '';
          return (
            <tr key={value}>
              <td class="mono">{value}</td>
              <td>{row.reason}</td>
              <td>
                <Time at={row.createdAt} />
              </td>
              <td>
                <button
                  type="button"
                  class="small"
                  aria-label={`Remove ${value}`}
                  disabled={busy}
                  onClick={() => remove(value)}
                >
                  Remove
                </button>
              </td>
            </tr>
          );
        }}
      />
    </Part>
  );
}

export function Suppressions() {
  return (
    <Page title="Suppressions">
      <p>No message of this account goes to a suppressed number or address, whatever its lists and opt-ins say.</p>
      <SuppressionList kind={SMS} />
      <SuppressionList kind={EMAIL} />
    </Page>
  );
}
