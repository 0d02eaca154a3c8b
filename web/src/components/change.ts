import { useState } from 'preact/hooks';
import { ApiError } from '../api.ts';

/** A change made through the API: whether one is under way, its error, the notice once done. */
export interface Change {
  busy: boolean;
  error: Error | null;
  notice: string;
  /** The API's field errors of the last failure (a 400 or 422), by field name. */
  fieldErrors: Map<string, string>;
  /** Runs `work`; `done` becomes the notice. Answers whether it succeeded. */
  run(work: () => Promise<unknown>, done: string): Promise<boolean>;
}

export function useChange(): Change {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | null>(null);
  const [notice, setNotice] = useState('');
  const run = async (work: () => Promise<unknown>, done: string) => {
    setBusy(true);
    setError(null);
    setNotice('');
    try {
      await work();
      setNotice(done);
      return true;
    } catch (failure) {
      setError(failure as Error);
      return false;
    } finally {
      setBusy(false);
    }
  };
  const fieldErrors = new Map(
    error instanceof ApiError ? error.fields.map(({ field, message }) => [field, message] as const) : [],
  );
  return { busy, error, notice, fieldErrors, run };
}
