import { useEffect, useRef, useState } from 'preact/hooks';
import { get, request, withQuery } from '../api.ts';
import { saveFile } from '../download.ts';
import {
  confirms,
  type Erasure,
  type ExportPage,
  erasedWords,
  exportEverything,
  exportFileName,
  identifierOf,
  type Person,
} from '../privacy.ts';
import { useChange } from './change.ts';
import { Part } from './page.tsx';
import { ErrorMessage } from './states.tsx';
import { Num, useNumber } from './zone.tsx';

/** How often an erasure's status is read until it is Completed or Failed. */
const POLL_MS = 500;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Every page of `GET /privacy/export` for the person, joined and saved as one JSON file made in the
 * browser (`herald-export-<identifier>.json`): nothing is built or kept on the server.
 */
function ExportPerson(props: { person: Person }) {
  const [read, setRead] = useState<number | null>(null);
  const change = useChange();
  const exportJson = () =>
    change.run(
      async () => {
        setRead(0);
        const joined = await exportEverything(
          (cursor) => get<ExportPage>(withQuery('/privacy/export', { ...props.person, cursor })),
          setRead,
        );
        saveFile(`${JSON.stringify(joined, null, 2)}\n`, exportFileName(props.person), 'application/json');
      },
      `The file ${exportFileName(props.person)} is saved.`,
    );
  return (
    <>
      <p>
        Everything the account holds about them, for a subject access request: their contacts and lists, every message
        to their numbers and addresses with its history and clicks, their suppressions and replies.
      </p>
      <button type="button" onClick={exportJson} disabled={change.busy}>
        Export their data
      </button>
      <p role="status" class="muted">
        {read !== null && change.busy && (
          <>
            <Num n={read} /> messages read…
          </>
        )}
      </p>
      {change.error && <ErrorMessage error={change.error} />}
      <p role="status" class="notice">
        {change.notice}
      </p>
    </>
  );
}

/**
 * Erases the person after they are named again: the erase button stays disabled until the number
 * or address is typed, so a slip of the mouse or a stray Enter erases no one. Then the erasure's
 * status is read until it is Completed (its counts) or Failed.
 */
function ErasePerson(props: { person: Person; onErased?: (erasure: Erasure) => void }) {
  const identifier = identifierOf(props.person);
  const [asking, setAsking] = useState(false);
  const [typed, setTyped] = useState('');
  const [erasure, setErasure] = useState<Erasure | null>(null);
  const change = useChange();
  const format = useNumber();
  const field = useRef<HTMLInputElement>(null);
  const mounted = useRef(true);
  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);
  useEffect(() => {
    if (asking) field.current?.focus();
  }, [asking]);
  const named = confirms(props.person, typed);
  const erase = (event: Event) => {
    event.preventDefault();
    if (!named) return;
    void change.run(async () => {
      const { erasureId } = await request<{ erasureId: string }>('POST', '/privacy/erasures', props.person);
      setAsking(false);
      setTyped('');
      const path = `/privacy/erasures/${erasureId}`;
      let status = await get<Erasure>(path);
      while (status.status === 'Processing' && mounted.current) {
        setErasure(status);
        await pause(POLL_MS);
        status = await get<Erasure>(path);
      }
      setErasure(status);
      if (status.status === 'Failed') throw new Error(`Erasure ${erasureId} failed: erase ${identifier} again.`);
      if (status.status === 'Completed') props.onErased?.(status);
    }, '');
  };
  const stop = () => {
    setAsking(false);
    setTyped('');
  };
  return (
    <>
      <p>
        Erasing takes their contacts, and their number or address and the texts sent to them out of every message and
        record of the account; counts and usage stay, and they stay suppressed. It cannot be undone.
      </p>
      {asking ? (
        <form class="confirm" onSubmit={erase} aria-label="Erase the person" noValidate>
          <p>
            Erase <span class="mono">{identifier}</span> and every number and address their contacts hold? Type{' '}
            <span class="mono">{identifier}</span> to confirm.
          </p>
          <label for="erase-confirm">Number or address to erase</label>
          <input
            id="erase-confirm"
            ref={field}
            type="text"
            value={typed}
            onInput={(e) => setTyped(e.currentTarget.value)}
            autocomplete="off"
            spellcheck={false}
          />
          <button type="submit" class="danger" disabled={!named || change.busy}>
            Yes, erase {identifier}
          </button>
          <button type="button" onClick={stop} disabled={change.busy}>
            Keep their data
          </button>
        </form>
      ) : (
        <button type="button" class="danger" onClick={() => setAsking(true)} disabled={change.busy}>
          Erase this person
        </button>
      )}
      {change.error && <ErrorMessage error={change.error} />}
      <p role="status" class="notice">
        {erasure?.status === 'Processing' && `Erasure ${erasure.erasureId} is processing…`}
        {erasure?.status === 'Completed' && erasedWords(erasure.erased, format)}
      </p>
    </>
  );
}

/** A person's data rights (docs/privacy.md): their data exported, or erased. */
export function PersonRights(props: { person: Person; onErased?: (erasure: Erasure) => void }) {
  return (
    <Part title="Data rights" id="person-rights">
      <ExportPerson person={props.person} />
      <ErasePerson person={props.person} onErased={props.onErased} />
    </Part>
  );
}
