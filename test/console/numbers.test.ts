import assert from 'node:assert/strict';
import { it } from 'node:test';
import { formatNumber } from '../../web/src/numbers.ts';

// The console writes counts and rates in the account's locale (its `locale`, SPEC §5.3).
it("groups digits as the account's locale does, with at most one decimal", () => {
  assert.equal(formatNumber(1234567, 'en'), '1,234,567');
  assert.equal(formatNumber(1234567, 'de'), '1.234.567');
  assert.equal(formatNumber(1234567, 'en-IN'), '12,34,567');
  assert.equal(formatNumber(66.666, 'en'), '66.7');
  assert.equal(formatNumber(0, 'en'), '0');
});
