import { useState } from 'preact/hooks';

/**
 * An id shown whole, selected whole by one click, with a button that copies it. The
 * clipboard API exists only in a secure context (HTTPS, or localhost): elsewhere the
 * selection is the way to copy, and no button is shown.
 */
export function CopyId(props: { id: string; name: string }) {
  const [outcome, setOutcome] = useState('');
  const copy = () =>
    navigator.clipboard.writeText(props.id).then(
      () => setOutcome('Copied.'),
      () => setOutcome('Not copied: select the id and copy it.'),
    );
  return (
    <span class="copy-id">
      <span class="mono id">{props.id}</span>
      {window.isSecureContext && 'clipboard' in navigator && (
        <button type="button" class="small" onClick={copy} aria-label={`Copy the ${props.name}`}>
          Copy
        </button>
      )}
      <span role="status" class="notice">
        {outcome}
      </span>
    </span>
  );
}
