import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { PAGE, sendInPages, type PageChannel, type PageRow } from '../../src/messaging/pipeline.ts';

// sendInPages's order of reads, hand-overs and records, with pages in memory: a page is read
// while the one before is handed over only when that one's record cannot change the read.

const row = (id: number, attempts = 0): PageRow => ({
  id,
  address: `r${id}@example.com`,
  tags: null,
  properties: null,
  attempts,
  deferred_at: null,
  message_id: null,
});
const rows = (from: number, count: number, attempts = 0) =>
  Array.from({ length: count }, (_, i) => row(from + i, attempts));

/**
 * Runs sendInPages over `pages` (what each read answers, in turn), logging each read,
 * hand-over and record.
 */
async function run(firstPage: PageRow[], pages: PageRow[][], options: { handsAhead?: boolean } = {}) {
  const log: string[] = [];
  let unrecorded = 0;
  let mostUnrecorded = 0;
  const lease = { id: 1, token: 't' };
  const given: Array<{ next: boolean; last: boolean }> = [];
  const channel: PageChannel<PageRow[], PageRow[]> = {
    handsAhead: options.handsAhead,
    load: async (cursor) => {
      log.push(`read after ${cursor}`);
      return pages.shift() ?? [];
    },
    finish: async () => {
      log.push('finish');
      return 'completed';
    },
    render: async (page, next) => {
      given.push({ next: next !== null, last: false });
      return page;
    },
    handOver: async (page) => {
      log.push(`hand over ${page[0].id}-${page.at(-1)!.id}`);
      mostUnrecorded = Math.max(mostUnrecorded, ++unrecorded);
      // The hand-over and its record take a turn of the event loop, as a transport's and a database's do.
      await new Promise((resolve) => setImmediate(resolve));
      return page;
    },
    record: async (_page, { cursor, lease: held, last }) => {
      assert.equal(held, lease, 'every record holds the job');
      given.at(-1)!.last = last;
      await new Promise((resolve) => setImmediate(resolve));
      log.push(`record up to ${cursor}`);
      unrecorded--;
      return last ? 'completed' : 'more';
    },
  };
  await sendInPages(
    { clock: new ManualClock(0) },
    { signal: new AbortController().signal, lease },
    { cursor: 0, firstPage },
    channel,
  );
  return { log, given, mostUnrecorded };
}

describe('sendInPages', () => {
  it(
    'reads the next page while a full page of first tries is handed over, and hands it over only after that page ' +
      'is recorded',
    async () => {
      const { log, given } = await run(rows(1, PAGE), [rows(PAGE + 1, PAGE), rows(2 * PAGE + 1, 3)]);
      assert.deepEqual(log, [
        `read after ${PAGE}`,
        `hand over 1-${PAGE}`,
        `record up to ${PAGE}`,
        `read after ${2 * PAGE}`,
        `hand over ${PAGE + 1}-${2 * PAGE}`,
        `record up to ${2 * PAGE}`,
        `hand over ${2 * PAGE + 1}-${2 * PAGE + 3}`,
        `record up to ${2 * PAGE + 3}`,
      ]);
      assert.deepEqual(given, [
        { next: true, last: false },
        { next: true, last: false },
        { next: false, last: true },
      ]);
    },
  );

  it('reads after the record when the page holds a retry: its record changes which retries are due', async () => {
    const page = [...rows(1, PAGE - 1), row(PAGE, 1)];
    const { log, given } = await run(page, [[]]);
    assert.deepEqual(log, [`hand over 1-${PAGE}`, `record up to ${PAGE}`, `read after ${PAGE}`, 'finish']);
    assert.deepEqual(given, [{ next: false, last: false }]);
  });

  it(
    'hands the page read ahead over before the one before it is recorded when the channel hands ahead, records ' +
      'in page order, and holds two pages unrecorded at most',
    async () => {
      const pages = [rows(PAGE + 1, PAGE), rows(2 * PAGE + 1, PAGE), rows(3 * PAGE + 1, 3)];
      const { log, mostUnrecorded } = await run(rows(1, PAGE), pages, { handsAhead: true });
      assert.deepEqual(log, [
        `read after ${PAGE}`,
        `hand over 1-${PAGE}`,
        `read after ${2 * PAGE}`,
        `hand over ${PAGE + 1}-${2 * PAGE}`,
        `record up to ${PAGE}`,
        `read after ${3 * PAGE}`,
        `hand over ${2 * PAGE + 1}-${3 * PAGE}`,
        `record up to ${2 * PAGE}`,
        `hand over ${3 * PAGE + 1}-${3 * PAGE + 3}`,
        `record up to ${3 * PAGE}`,
        `record up to ${3 * PAGE + 3}`,
      ]);
      assert.equal(mostUnrecorded, 2);
    },
  );

  it('hands a page holding a retry over only after the one before is recorded, even when handing ahead', async () => {
    const page = [...rows(1, PAGE - 1), row(PAGE, 1)];
    const { log, mostUnrecorded } = await run(page, [rows(PAGE + 1, 2)], { handsAhead: true });
    assert.deepEqual(log, [
      `hand over 1-${PAGE}`,
      `record up to ${PAGE}`,
      `read after ${PAGE}`,
      `hand over ${PAGE + 1}-${PAGE + 2}`,
      `record up to ${PAGE + 2}`,
    ]);
    assert.equal(mostUnrecorded, 1);
  });
});
