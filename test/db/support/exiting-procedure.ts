import { procedure } from '../../../src/db/procedure.ts';

/** A procedure that ends the thread it runs on, as an error it did not catch would: SQLite only. */
export const endsItsThread = procedure(import.meta.url, 'endsItsThread', async () => {
  process.exit(3);
});
