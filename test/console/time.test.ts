import assert from 'node:assert/strict';
import { it } from 'node:test';
import { addDays, chartDate, dayStart, formatDay, formatTime, localDate, zoneOf } from '../../web/src/time.ts';

// The console shows times in the account's timeZoneOffset, whatever the browser's own zone.
it("reads the account's offset, and shows an instant on its local clock and day", () => {
  const india = zoneOf('UTC+05:30~India Standard Time', 'en-GB');
  assert.deepEqual(india, { offsetMinutes: 330, label: 'UTC+05:30', locale: 'en-GB' });
  assert.equal(zoneOf('UTC-03:00~Brasilia Time', 'pt-BR').offsetMinutes, -180);
  // 18:45 UTC is 00:15 the next day in India.
  assert.equal(formatTime('2026-03-10T18:45:00.000Z', india), '11 Mar 2026, 00:15:00');
  assert.equal(localDate(Date.UTC(2026, 2, 10, 18, 45), india), '2026-03-11');
  assert.equal(localDate(Date.UTC(2026, 2, 10, 18, 15), india), '2026-03-10');
  assert.equal(formatTime(null, india), '—');
});

it('falls back to UTC and English for what it cannot read', () => {
  assert.deepEqual(zoneOf('nonsense', 'xx-not-a-locale!'), { offsetMinutes: 0, label: 'UTC', locale: 'en' });
});

it('steps days across month and year ends', () => {
  assert.equal(addDays('2026-03-01', -1), '2026-02-28');
  assert.equal(addDays('2026-12-31', 1), '2027-01-01');
  assert.equal(addDays('2026-03-31', -29), '2026-03-02');
});

it("gives the chart a Date whose local fields are the account's", () => {
  const d = chartDate(Date.UTC(2026, 2, 10, 18, 45) / 1000, zoneOf('UTC+05:30~India Standard Time', 'en'));
  assert.deepEqual([d.getFullYear(), d.getMonth(), d.getDate(), d.getHours(), d.getMinutes()], [2026, 2, 11, 0, 15]);
});

it("finds a day's first instant in the account's offset, and names the day an instant is in", () => {
  const india = zoneOf('UTC+05:30~India Standard Time', 'en-GB');
  assert.equal(new Date(dayStart('2026-03-11', india)).toISOString(), '2026-03-10T18:30:00.000Z');
  assert.equal(formatDay(dayStart('2026-03-11', india), india), '11 Mar 2026');
  assert.equal(formatDay(Date.UTC(2026, 2, 10, 18, 29), india), '10 Mar 2026');
});
