import type { InputHTMLAttributes } from 'preact';
import type { Change } from './change.ts';

/**
 * The API's problem with a field of the last request (a 400, 409 or 422), by the field's name:
 * `events[1]` and `events` are both the `events` field's.
 */
export function problemOf(change: Change, name: string): string | undefined {
  for (const [field, message] of change.fieldErrors)
    if (field === name || field.startsWith(`${name}[`) || field.startsWith(`${name}.`)) return message;
  return undefined;
}

/** A text field of a form, with the API's problem with it said beside it. */
export function Field(props: {
  id: string;
  label: string;
  value: string;
  onInput: (value: string) => void;
  problem?: string;
  multiline?: boolean;
  /** The input's kind and its own attributes (`{type: 'password'}`); a text field by default. */
  input?: InputHTMLAttributes<HTMLInputElement>;
  inputMode?: 'numeric' | 'email';
  autocomplete?: string;
  required?: boolean;
  maxLength?: number;
}) {
  const described = props.problem ? `${props.id}-problem` : undefined;
  const common = {
    id: props.id,
    value: props.value,
    'aria-invalid': props.problem ? true : undefined,
    'aria-describedby': described,
    autocomplete: props.autocomplete ?? 'off',
    required: props.required,
    maxLength: props.maxLength,
  } as const;
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      {props.multiline ? (
        <textarea {...common} rows={2} onInput={(e) => props.onInput(e.currentTarget.value)} />
      ) : (
        <input
          {...common}
          type="text"
          {...props.input}
          inputMode={props.inputMode}
          onInput={(e) => props.onInput(e.currentTarget.value)}
        />
      )}
      {props.problem && (
        <span class="error" id={described}>
          {props.problem}
        </span>
      )}
    </div>
  );
}

/**
 * Checkboxes of a set of words (scopes, event types), each with what it means, in a fieldset
 * named by its legend; the API's problem with the set is said under the legend.
 */
export function Choices(props: {
  id: string;
  legend: string;
  choices: ReadonlyArray<{ value: string; meaning: string }>;
  chosen: readonly string[];
  onChange: (chosen: string[]) => void;
  problem?: string;
}) {
  const described = props.problem ? `${props.id}-problem` : undefined;
  const toggle = (value: string, on: boolean) =>
    props.onChange(props.choices.map((c) => c.value).filter((v) => (v === value ? on : props.chosen.includes(v))));
  return (
    <fieldset class="choices" aria-describedby={described}>
      <legend>{props.legend}</legend>
      {props.problem && (
        <p class="error" id={described}>
          {props.problem}
        </p>
      )}
      {props.choices.map((choice, i) => (
        <div class="choice" key={choice.value}>
          <input
            type="checkbox"
            id={`${props.id}-${i}`}
            checked={props.chosen.includes(choice.value)}
            onChange={(e) => toggle(choice.value, e.currentTarget.checked)}
            aria-describedby={`${props.id}-${i}-meaning`}
          />
          <label for={`${props.id}-${i}`}>
            <code>{choice.value}</code>
          </label>
          <span class="muted" id={`${props.id}-${i}-meaning`}>
            {choice.meaning}
          </span>
        </div>
      ))}
    </fieldset>
  );
}

/**
 * The account's password, asked again under the console's session for what outlives it (an
 * API key, a webhook URL: docs/api-keys.md). The form empties it after each try.
 */
export function PasswordAgain(props: {
  id: string;
  /** What it is asked for: "create a key". */
  to: string;
  value: string;
  onInput: (value: string) => void;
  problem?: string;
}) {
  return (
    <Field
      id={props.id}
      label={`Your password (asked again to ${props.to})`}
      input={{ type: 'password' }}
      autocomplete="current-password"
      value={props.value}
      required
      onInput={props.onInput}
      problem={props.problem}
    />
  );
}
