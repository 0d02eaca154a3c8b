import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { quietUntil } from '../../src/messaging/holds.ts';
import { countryZone, recipientZone } from '../../src/messaging/recipient-zone.ts';
import { instantOf, localTime, nextWallClock, offsetAt, zoneName } from '../../src/messaging/zone-time.ts';

// A recipient's zone (property, country, account) and wall-clock time in it across DST.

const iso = (ms: number) => new Date(ms).toISOString();
const PARIS = { name: 'Europe/Paris' };
const FRENCH = '33612345678';
const AMERICAN = '12015550123';

describe('recipient zone', () => {
  it('takes the timeZone property first, in any case, then the country, then the account offset', () => {
    const named = new Map([['timezone', 'america/los_angeles']]);
    assert.deepEqual(recipientZone(AMERICAN, named, 60), {
      zone: { name: 'America/Los_Angeles' },
      source: 'property',
    });
    assert.deepEqual(recipientZone(FRENCH, null, 330), { zone: { name: 'Europe/Paris' }, source: 'country' });
    assert.deepEqual(recipientZone(AMERICAN, null, -300), { zone: { offsetMinutes: -300 }, source: 'account' });
  });

  it('passes over a timeZone that is no IANA name, as if unset', () => {
    for (const value of ['Mars/Olympus', '', '+02:00', 'UTC+05:30~India Standard Time']) {
      assert.equal(recipientZone(FRENCH, new Map([['timezone', value]]), 0).source, 'country', value);
    }
  });

  it('knows a country of one zone, or of zones keeping one time; none for a country of several times', () => {
    assert.equal(countryZone('FR'), 'Europe/Paris');
    assert.equal(countryZone('JP'), 'Asia/Tokyo');
    assert.equal(countryZone('DE'), 'Europe/Berlin', 'Berlin and Büsingen keep the same time');
    for (const country of ['US', 'CA', 'ES', 'AU', 'RU', 'BR', '']) assert.equal(countryZone(country), undefined);
  });

  it('canonicalises a zone name and refuses what the runtime does not know', () => {
    assert.equal(zoneName('europe/paris'), 'Europe/Paris');
    assert.equal(zoneName('Nowhere/Town'), undefined);
  });
});

describe('wall clock in a zone', () => {
  it("reads Paris's clock an hour or two ahead of UTC, by its daylight saving time", () => {
    assert.equal(offsetAt(PARIS, Date.UTC(2026, 0, 15)), 60);
    assert.equal(offsetAt(PARIS, Date.UTC(2026, 6, 15)), 120);
    assert.deepEqual(localTime(PARIS, Date.UTC(2026, 2, 29, 7, 0)), {
      year: 2026,
      month: 3,
      day: 29,
      hour: 9,
      minute: 0,
    });
  });

  it('finds the next 08:00 in Paris across the change to summer time: 07:00 UTC, then 06:00 UTC', () => {
    // Clocks went from 02:00 to 03:00 on Sunday 29 March 2026.
    assert.equal(
      iso(nextWallClock(PARIS, Date.UTC(2026, 2, 27, 21), { hour: 8, minute: 0 })),
      '2026-03-28T07:00:00.000Z',
    );
    assert.equal(
      iso(nextWallClock(PARIS, Date.UTC(2026, 2, 28, 21), { hour: 8, minute: 0 })),
      '2026-03-29T06:00:00.000Z',
    );
    // And back on Sunday 25 October.
    assert.equal(
      iso(nextWallClock(PARIS, Date.UTC(2026, 9, 24, 21), { hour: 8, minute: 0 })),
      '2026-10-25T07:00:00.000Z',
    );
  });

  it('takes a skipped time as the instant the clock jumps past it, and a repeated one as its first', () => {
    const skipped = { year: 2026, month: 3, day: 29, hour: 2, minute: 30 };
    assert.equal(iso(instantOf(PARIS, skipped)), '2026-03-29T01:00:00.000Z');
    const twice = { year: 2026, month: 10, day: 25, hour: 2, minute: 30 };
    assert.equal(iso(instantOf(PARIS, twice)), '2026-10-25T00:30:00.000Z');
  });

  it('holds a recipient inside quiet hours that end in the repeated hour until the end still to come', () => {
    const window = { start: '22:00', end: '02:30' };
    // 02:10 summer time, the first 02:10: the first 02:30 is next.
    assert.equal(iso(quietUntil(window, PARIS, Date.UTC(2026, 9, 25, 0, 10))!), '2026-10-25T00:30:00.000Z');
    // 02:00 winter time, after the first 02:30: the second one, not tomorrow's.
    assert.equal(iso(quietUntil(window, PARIS, Date.UTC(2026, 9, 25, 1, 0))!), '2026-10-25T01:30:00.000Z');
    assert.equal(quietUntil(window, PARIS, Date.UTC(2026, 9, 25, 0, 40)), null, '02:40 the first time: outside');
  });

  it('keeps a fixed offset the year round: no daylight saving time', () => {
    const india = { offsetMinutes: 330 };
    assert.equal(iso(nextWallClock(india, Date.UTC(2026, 0, 1), { hour: 8, minute: 0 })), '2026-01-01T02:30:00.000Z');
    assert.equal(iso(nextWallClock(india, Date.UTC(2026, 6, 1), { hour: 8, minute: 0 })), '2026-07-01T02:30:00.000Z');
    assert.equal(offsetAt({ offsetMinutes: -300 }, Date.UTC(2026, 6, 1)), -300);
  });

  it('answers the next day when the time has passed today, never the instant given', () => {
    const at = Date.UTC(2026, 0, 10, 7, 0); // 08:00 in Paris
    assert.equal(iso(nextWallClock(PARIS, at, { hour: 8, minute: 0 })), '2026-01-11T07:00:00.000Z');
  });
});
