/**
 * The report reader's thread (report-reader.ts): reads each mail it is given with
 * mail-reports.ts, one after another, in the order given.
 */
import { parentPort } from 'node:worker_threads';
import { readMailReport } from './mail-reports.ts';
import type { ReportRequest, ReportResponse } from './report-reader.ts';

let turn = Promise.resolve();

parentPort!.on('message', ({ call, message }: ReportRequest) => {
  turn = turn.then(async () => {
    const report = await readMailReport(Buffer.from(message.buffer, message.byteOffset, message.byteLength));
    parentPort!.postMessage({ call, report } satisfies ReportResponse);
  });
});
