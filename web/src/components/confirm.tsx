import { useEffect, useRef, useState } from 'preact/hooks';

/**
 * A button for a change that cannot be undone (a deletion): the first press asks, in words,
 * what will happen; only "Yes, …" does it. The question takes the focus, on the button that keeps
 * things as they are, so a keyboard user hears it and a stray Enter changes nothing.
 */
export function Confirm(props: {
  label: string;
  /** What the button and the question are named by, where the label alone is the same on every row ("Revoke"). */
  name?: string;
  question: string;
  yes: string;
  no: string;
  busy?: boolean;
  onConfirm: () => Promise<boolean>;
}) {
  const [asking, setAsking] = useState(false);
  const keep = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) keep.current?.focus();
  }, [asking]);
  if (!asking)
    return (
      <button
        type="button"
        class="danger"
        onClick={() => setAsking(true)}
        disabled={props.busy}
        aria-label={props.name}
      >
        {props.label}
      </button>
    );
  const confirm = async () => {
    if (await props.onConfirm()) setAsking(false);
  };
  return (
    <fieldset class="confirm" aria-label={props.name ?? props.label}>
      <p>{props.question}</p>
      <button type="button" class="danger" onClick={confirm} disabled={props.busy}>
        {props.yes}
      </button>
      <button type="button" ref={keep} onClick={() => setAsking(false)}>
        {props.no}
      </button>
    </fieldset>
  );
}
