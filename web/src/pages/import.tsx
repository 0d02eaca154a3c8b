import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, get, request } from '../api.ts';
import {
  batchesOf,
  type CheckedRow,
  type CsvFile,
  checkRows,
  FIELD_TARGETS,
  guessMapping,
  mappingProblems,
  parseCsv,
  problemsByLine,
  type Target,
} from '../contacts-csv.ts';
import { useLoad } from '../load.ts';
import { Link } from '../router.tsx';
import type { ContactList } from '../types.ts';
import { Page, Part } from '../components/page.tsx';
import { ErrorMessage, Show } from '../components/states.tsx';
import { Table } from '../components/table.tsx';
import { Num, useNumber } from '../components/zone.tsx';
import { ALL_CONTACTS, listsOf, propertiesOf } from './contacts.tsx';

interface Outcome {
  count: number;
}

/** `GET /contacts/batch/{batchId}`, the parts the import shows. */
interface BatchStatus {
  batchId: string;
  status: 'Queued' | 'Processing' | 'Completed' | 'Failed';
  inserted: Outcome | null;
  updated: Outcome | null;
  skipped: Outcome | null;
  error: string | null;
  /** A queued batch whose job failed and will be tried again. */
  retrying: { failedAttempts: number; maxAttempts: number; lastError: string } | null;
}

/** One batch of the import as it goes: its lines, then its id and status, or why it was refused. */
interface SentBatch {
  lines: number[];
  status?: BatchStatus;
  refused?: string[];
}

/** How often a sent batch's status is read until it is applied. */
const POLL_MS = 500;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Where each column of the file goes: a field, a property, or nowhere. */
function Mapping(props: {
  file: CsvFile;
  properties: string[];
  mapping: Target[];
  onChange: (mapping: Target[]) => void;
}) {
  const { file, mapping } = props;
  return (
    <Table caption="Columns of the file" head={['Column', 'First row', 'Fills']} rows={file.header.length}>
      {file.header.map((name, i) => (
        <tr key={`${i} ${name}`}>
          <td>{name || `(column ${i + 1})`}</td>
          <td class="wrap">{file.rows[0]?.cells[i] ?? ''}</td>
          <td>
            <select
              aria-label={`Column ${name || i + 1} fills`}
              value={mapping[i]}
              onChange={(e) => props.onChange(mapping.map((t, j) => (j === i ? (e.currentTarget.value as Target) : t)))}
            >
              <option value="ignore">Nothing (ignored)</option>
              {FIELD_TARGETS.map(([target, label]) => (
                <option key={target} value={target}>
                  {label}
                </option>
              ))}
              {props.properties.map((property) => (
                <option key={property} value={`property:${property}`}>
                  Property {property}
                </option>
              ))}
            </select>
          </td>
        </tr>
      ))}
    </Table>
  );
}

/** Bad rows listed at most: a wrong mapping makes every row bad, and 100,000 items would stall the page. */
const SHOWN_BAD_ROWS = 500;

/** The rows that will not be sent, by line, each with every problem found. */
function BadRows(props: { rows: CheckedRow[] }) {
  const bad = props.rows.filter((row): row is { line: number; problems: string[] } => 'problems' in row);
  const format = useNumber();
  if (bad.length === 0) return <p class="notice">Every row is good.</p>;
  return (
    <div role="alert">
      <p class="error">
        {format(bad.length)} {bad.length === 1 ? 'row is' : 'rows are'} not good and will not be sent:
      </p>
      <ul class="problems" aria-label="Rows not sent">
        {bad.slice(0, SHOWN_BAD_ROWS).map((row) => (
          <li key={row.line}>
            Line {row.line}: {row.problems.join('; ')}
          </li>
        ))}
      </ul>
      {bad.length > SHOWN_BAD_ROWS && (
        <p>And {format(bad.length - SHOWN_BAD_ROWS)} more: fix these first, or check the mapping of the columns.</p>
      )}
    </div>
  );
}

const retryingOf = (status: BatchStatus | undefined) =>
  status?.retrying
    ? `Attempt ${status.retrying.failedAttempts} of ${status.retrying.maxAttempts} failed ` +
      `(${status.retrying.lastError}); it will be tried again.`
    : '';

function Results(props: { batches: SentBatch[]; total: number }) {
  const format = useNumber();
  const applied = props.batches
    .filter((b) => b.status?.status === 'Completed')
    .reduce((sum, b) => sum + b.lines.length, 0);
  const count = (outcome: Outcome | null | undefined) => (outcome ? format(outcome.count) : '—');
  return (
    <>
      <label for="import-progress">Contacts applied</label>
      <progress id="import-progress" max={props.total} value={applied} />
      <p role="status">
        {format(applied)} of {format(props.total)} contacts applied.
      </p>
      <Table
        caption="Batches sent"
        head={['Batch', 'Lines', 'Contacts', 'Status', 'Inserted', 'Updated', 'Skipped', 'Error']}
        rows={props.batches.length}
      >
        {props.batches.map((b, i) => (
          <tr key={b.lines[0]}>
            <td>
              {i + 1}
              {b.status && <span class="mono id"> {b.status.batchId}</span>}
            </td>
            <td>
              {b.lines[0]}–{b.lines[b.lines.length - 1]}
            </td>
            <td>
              <Num n={b.lines.length} />
            </td>
            <td>{b.refused ? 'Refused' : (b.status?.status ?? 'Sending')}</td>
            <td>{count(b.status?.inserted)}</td>
            <td>{count(b.status?.updated)}</td>
            <td>{count(b.status?.skipped)}</td>
            <td class="wrap">{b.refused?.join('; ') ?? b.status?.error ?? retryingOf(b.status)}</td>
          </tr>
        ))}
      </Table>
    </>
  );
}

function Importer(props: { properties: string[]; lists: ContactList[] }) {
  const [name, setName] = useState('');
  const [file, setFile] = useState<CsvFile | null>(null);
  const [mapping, setMapping] = useState<Target[]>([]);
  const [listId, setListId] = useState('');
  const [rows, setRows] = useState<CheckedRow[] | null>(null);
  const [readError, setReadError] = useState<Error | null>(null);
  const [sent, setSent] = useState<SentBatch[] | null>(null);
  const [sending, setSending] = useState(false);
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );

  const choose = async (input: HTMLInputElement) => {
    const chosen = input.files?.[0];
    setRows(null);
    setSent(null);
    setReadError(null);
    if (!chosen) return;
    try {
      const parsed = parseCsv(await chosen.text());
      if (parsed.header.length === 0) throw new Error('The file has no rows.');
      setName(chosen.name);
      setFile(parsed);
      setMapping(guessMapping(parsed.header, props.properties));
    } catch (failure) {
      setFile(null);
      setReadError(failure as Error);
    }
  };

  const problems = file ? mappingProblems(mapping) : [];
  // The rows are checked again whenever the mapping changes, with the API's rules loaded on first use.
  useEffect(() => {
    let current = true;
    setRows(null);
    if (!file || problems.length > 0) return;
    import('../contact-rules.ts').then(
      (rules) => current && setRows(checkRows(file, mapping, rules)),
      (failure: Error) => current && setReadError(failure),
    );
    return () => {
      current = false;
    };
  }, [file, mapping.join('\n')]);

  const batches = rows ? batchesOf(rows) : [];
  const good = batches.reduce((sum, b) => sum + b.entries.length, 0);

  const send = async () => {
    setSending(true);
    const progress: SentBatch[] = batches.map((b) => ({ lines: b.lines }));
    const show = () => mounted.current && setSent(progress.map((b) => ({ ...b })));
    show();
    try {
      for (const [i, batch] of batches.entries()) {
        try {
          const accepted = await request<{ data: { BatchId: string } }>('POST', '/contacts/batch', {
            ...(listId === '' ? {} : { listId }),
            createUpdateContacts: batch.entries,
          });
          let status = await get<BatchStatus>(`/contacts/batch/${accepted.data.BatchId}`);
          progress[i].status = status;
          show();
          while (mounted.current && (status.status === 'Queued' || status.status === 'Processing')) {
            await pause(POLL_MS);
            status = await get<BatchStatus>(`/contacts/batch/${accepted.data.BatchId}`);
            progress[i].status = status;
            show();
          }
          if (status.status === 'Failed') break;
        } catch (failure) {
          const error = failure as Error;
          progress[i].refused =
            error instanceof ApiError && error.fields.length > 0
              ? [error.message, ...problemsByLine(batch.lines, error.fields)]
              : [error.message];
          show();
          break;
        }
      }
    } finally {
      if (mounted.current) setSending(false);
    }
  };

  const format = useNumber();
  return (
    <>
      <Part title="1. The file" id="import-file">
        <p>
          A CSV file with a header row: comma, semicolon or tab separated, UTF-8. The export of a list is one; its
          columns are mapped without a change.
        </p>
        <label for="import-file-input">CSV file</label>{' '}
        <input
          id="import-file-input"
          type="file"
          accept=".csv,text/csv,text/plain"
          disabled={sending}
          onChange={(e) => void choose(e.currentTarget)}
        />
        {readError && <ErrorMessage error={readError} />}
        {file && (
          <p>
            {name}: <Num n={file.rows.length} /> rows after the header, separated by{' '}
            {file.delimiter === '\t' ? 'tabs' : `"${file.delimiter}"`}.
          </p>
        )}
      </Part>
      {file && (
        <Part title="2. Columns" id="import-columns">
          <Mapping file={file} properties={props.properties} mapping={mapping} onChange={setMapping} />
          {problems.length > 0 && (
            <ul role="alert" class="error">
              {problems.map((problem) => (
                <li key={problem}>{problem}</li>
              ))}
            </ul>
          )}
          <p>
            <label for="import-list">Also add them to</label>{' '}
            <select id="import-list" value={listId} onChange={(e) => setListId(e.currentTarget.value)}>
              <option value="">No other list (All contacts only)</option>
              {props.lists
                .filter((list) => list.name !== ALL_CONTACTS)
                .map((list) => (
                  <option key={list.listId} value={list.listId}>
                    {list.name}
                  </option>
                ))}
            </select>
          </p>
        </Part>
      )}
      {file && rows && (
        <Part title="3. Rows" id="import-rows">
          <p>
            {format(good)} of {format(rows.length)} rows are good: they go in {format(batches.length)}{' '}
            {batches.length === 1 ? 'batch' : 'batches'} of at most 1,000. A blank cell keeps the contact's value.
          </p>
          <BadRows rows={rows} />
          <button type="button" onClick={() => void send()} disabled={sending || good === 0 || sent !== null}>
            Send {format(good)} contacts
          </button>
        </Part>
      )}
      {sent && (
        <Part title="4. Sent" id="import-sent">
          <Results batches={sent} total={good} />
        </Part>
      )}
    </>
  );
}

/**
 * Contacts from a CSV file: read and checked in the browser, every bad row shown by its line
 * before anything is sent, then sent as contact batches of 1,000, each followed until applied.
 */
export function ImportContacts() {
  const loaded = useLoad(() => Promise.all([propertiesOf(), listsOf()]), 'import');
  return (
    <Page title="Import contacts">
      <p>
        <Link href="/contacts">Back to the contacts</Link>
      </p>
      <Show loaded={loaded}>{([properties, lists]) => <Importer properties={properties} lists={lists} />}</Show>
    </Page>
  );
}
