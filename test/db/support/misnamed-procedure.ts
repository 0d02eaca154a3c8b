import { procedure } from '../../../src/db/procedure.ts';

/** Exported under one name while its ref gives another: a typo that must stop the start. */
export const applyBatch = procedure(import.meta.url, 'applyBatchJob', async () => 'ran');
