import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ACCOUNT_TTL_MS, AccessCache, type CachedAccount } from '../../src/auth/access-cache.ts';
import type { KnownApiKey } from '../../src/auth/api-keys.ts';
import { ManualClock } from '../../src/clock.ts';

// The account cache alone, with a read the test answers: no storage is involved.
const row = (tokenVersion: number): CachedAccount => ({
  id: 'account',
  user_name: 'someone@example.com',
  token_version: tokenVersion,
  time_zone_offset: 'UTC+00:00',
  locale: 'en',
  rate_limits: null,
  inbound_sms_webhook_url: null,
  verify: null,
  smart_encoding: false,
  quiet_hours: null,
});

/** A read that counts its calls and answers when the test says. */
function heldRead() {
  const answers: Array<(row: CachedAccount | undefined) => void> = [];
  return {
    read: () => new Promise<CachedAccount | undefined>((answer) => answers.push(answer)),
    get calls() {
      return answers.length;
    },
    answer: (index: number, value: CachedAccount | undefined) => answers[index](value),
  };
}

it('reads a stale account once for all the requests that ask while it is read', async () => {
  const clock = new ManualClock();
  const cache = new AccessCache(clock);
  const held = heldRead();
  const asked = Array.from({ length: 20 }, () => cache.accountOr('account', held.read));
  assert.equal(held.calls, 1);
  held.answer(0, row(1));
  for (const answer of await Promise.all(asked)) assert.equal(answer?.token_version, 1);

  assert.equal((await cache.accountOr('account', held.read))?.token_version, 1, 'remembered');
  assert.equal(held.calls, 1);
  clock.advance(ACCOUNT_TTL_MS);
  const again = cache.accountOr('account', held.read);
  assert.equal(held.calls, 2, 'read again once stale');
  held.answer(1, row(2));
  assert.equal((await again)?.token_version, 2);
});

it('does not remember a read that was under way when this process changed the account', async () => {
  const cache = new AccessCache(new ManualClock());
  const held = heldRead();
  const before = cache.accountOr('account', held.read);
  cache.forget('account');
  const after = cache.accountOr('account', held.read);
  assert.equal(held.calls, 2, 'a request after the change does not wait for the read from before it');
  held.answer(0, row(1));
  held.answer(1, row(2));
  assert.equal((await before)?.token_version, 1);
  assert.equal((await after)?.token_version, 2);
  assert.equal((await cache.accountOr('account', held.read))?.token_version, 2, 'the later read is remembered');
  assert.equal(held.calls, 2);
});

it('reads again after a read that failed or found no account', async () => {
  const cache = new AccessCache(new ManualClock());
  await assert.rejects(cache.accountOr('account', () => Promise.reject(new Error('database down'))));
  assert.equal(await cache.accountOr('account', async () => undefined), undefined);
  assert.equal((await cache.accountOr('account', async () => row(3)))?.token_version, 3);
});

it('reads an API key once for the requests that ask while it is read, and again once revoked here', async () => {
  const cache = new AccessCache(new ManualClock());
  let calls = 0;
  const key: KnownApiKey = {
    id: 'key',
    accountId: 'account',
    scopes: new Set(['read']),
    expiresAt: null,
    lastUsedAt: null,
  };
  const read = async () => {
    calls += 1;
    return key;
  };
  const asked = await Promise.all(Array.from({ length: 5 }, () => cache.apiKeyOr('hash', read)));
  assert.deepEqual(asked, Array(5).fill(key));
  assert.equal(calls, 1);
  cache.forgetApiKey('hash');
  assert.equal(await cache.apiKeyOr('hash', async () => undefined), undefined, 'revoked: read again, and gone');
});
