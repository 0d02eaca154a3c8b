import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { SignJWT, UnsecuredJWT } from 'jose';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp, type TestAccount, type TestApp } from '../support/app.ts';
import { openDatabase } from '../../src/db/database.ts';
import { deleteAccount, rotatePrivateToken, setPassword } from '../../src/accounts/service.ts';
import { ACCOUNT_TTL_MS } from '../../src/auth/access-cache.ts';

forEachDatabase((dialect) => {
  let t: TestApp;
  let account: TestAccount;
  beforeEach(async () => {
    t = await startTestApp(dialect);
    account = await t.createAccount();
  });
  afterEach(() => t.close());

  const call = (headers: Record<string, string>) => t.app.inject({ method: 'GET', url: '/account', headers });

  const assertInvalidToken = (response: Awaited<ReturnType<typeof call>>, pattern: RegExp) => {
    assert.equal(response.statusCode, 401);
    assert.equal(response.headers['www-authenticate'], 'Bearer error="invalid_token"');
    assert.equal(response.json().status, 'Failure');
    assert.match(response.json().message, pattern);
  };

  const claims = () => ({ sub: account.row.id, iss: 'herald', ver: 0 });
  const now = () => Math.floor(t.clock.now() / 1000);

  it('lets a valid token through to the account', async () => {
    const response = await call(bearer(await t.tokenFor(account)));
    assert.equal(response.statusCode, 200);
    assert.equal(response.json().userName, account.userName);
  });

  it('asks for a token when none is sent', async () => {
    const response = await call({});
    assert.equal(response.statusCode, 401);
    assert.equal(response.headers['www-authenticate'], 'Bearer');
  });

  it('refuses an Authorization header that is not Bearer', async () => {
    assertInvalidToken(await call({ authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }), /Bearer/);
  });

  it('refuses a malformed token', async () => {
    assertInvalidToken(await call(bearer('not.a.jwt')), /malformed/);
  });

  it('refuses a token written otherwise than signed: padded, a character appended, a spare bit set', async () => {
    const token = await t.tokenFor(account);
    // The HS256 signature is 32 bytes: its last character carries 2 bits that decode to nothing.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const spareBit = token.slice(0, -1) + alphabet[alphabet.indexOf(token.at(-1)!) ^ 1];
    for (const variant of [`${token}=`, `${token}A`, spareBit]) {
      assertInvalidToken(await call(bearer(variant)), /malformed|signature/);
    }
    assert.equal((await call(bearer(token))).statusCode, 200);
  });

  it('refuses alg: none', async () => {
    const unsecured = new UnsecuredJWT(claims())
      .setIssuedAt(now())
      .setExpirationTime(now() + 600)
      .encode();
    assertInvalidToken(await call(bearer(unsecured)), /algorithm/);
  });

  it('refuses another algorithm with the right key (HS512)', async () => {
    const token = await new SignJWT(claims())
      .setProtectedHeader({ alg: 'HS512' })
      .setIssuedAt(now())
      .setExpirationTime(now() + 600)
      .sign(t.ctx.jwtKey);
    assertInvalidToken(await call(bearer(token)), /algorithm/);
  });

  it('refuses a token signed with another key', async () => {
    const otherKey = new TextEncoder().encode('another-key-another-key-another-key!');
    const token = await new SignJWT(claims())
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuedAt(now())
      .setExpirationTime(now() + 600)
      .sign(otherKey);
    assertInvalidToken(await call(bearer(token)), /signature/);
  });

  it('refuses a tampered payload', async () => {
    const [header, , signature] = (await t.tokenFor(account)).split('.');
    const forged = Buffer.from(
      JSON.stringify({ ...claims(), sub: '00000000-0000-4000-8000-000000000000', exp: now() + 600 }),
    ).toString('base64url');
    assertInvalidToken(await call(bearer(`${header}.${forged}.${signature}`)), /signature/);
  });

  it('refuses a token whose account was deleted', async () => {
    const token = await t.tokenFor(account);
    assert.equal((await call(bearer(token))).statusCode, 200);
    const deleted = await t.app.inject({
      method: 'DELETE',
      url: `/admin/accounts/${account.row.id}`,
      headers: bearer(ADMIN_TOKEN),
    });
    assert.equal(deleted.statusCode, 204);
    assertInvalidToken(await call(bearer(token)), /no longer exists/);
  });

  it('revokes every earlier token when the private token is rotated', async () => {
    const before = await t.tokenFor(account);
    assert.equal((await call(bearer(before))).statusCode, 200);
    const rotated = await t.app.inject({
      method: 'POST',
      url: `/admin/accounts/${account.row.id}/rotate-private-token`,
      headers: bearer(ADMIN_TOKEN),
    });
    assert.equal(rotated.statusCode, 200);
    const newPrivateToken = rotated.json().privateToken;
    assert.notEqual(newPrivateToken, account.privateToken);
    assertInvalidToken(await call(bearer(before)), /revoked/);

    const oldCredentials = await t.app.inject({
      method: 'POST',
      url: '/token',
      payload: {
        userName: account.userName,
        password: account.password,
        privateToken: account.privateToken,
        validity: 'Default',
      },
    });
    assert.equal(oldCredentials.statusCode, 401);
    const after = await t.tokenFor({ ...account, privateToken: newPrivateToken });
    assert.equal((await call(bearer(after))).statusCode, 200);
  });

  it('revokes every earlier token when the password changes', async () => {
    const before = await t.tokenFor(account);
    assert.equal((await call(bearer(before))).statusCode, 200);
    const changed = await t.app.inject({
      method: 'PUT',
      url: `/admin/accounts/${account.row.id}/password`,
      headers: bearer(ADMIN_TOKEN),
      payload: { password: 'a brand new passphrase' },
    });
    assert.equal(changed.statusCode, 200);
    assertInvalidToken(await call(bearer(before)), /revoked/);
    const after = await t.tokenFor({ ...account, password: 'a brand new passphrase' });
    assert.equal((await call(bearer(after))).statusCode, 200);
  });

  // Another process (a second API process, or the CLI) changes the account through its own
  // connection: this process learns of it when its account read is more than a second old.
  const revocations: Array<
    [string, (db: ReturnType<typeof openDatabase>['db'], id: string) => Promise<unknown>, RegExp]
  > = [
    ['a password change', (db, id) => setPassword(db, t.clock, id, 'another good passphrase'), /revoked/],
    ['a private-token rotation', (db, id) => rotatePrivateToken(db, t.clock, id), /revoked/],
    ["the account's deletion", (db, id) => deleteAccount(db, id), /no longer exists/],
  ];
  for (const [change, make, pattern] of revocations) {
    it(`refuses a remembered token within a second of ${change} made by another process`, async () => {
      const token = await t.tokenFor(account);
      assert.equal((await call(bearer(token))).statusCode, 200);
      const other = openDatabase(t.database.url);
      try {
        await make(other.db, account.row.id);
      } finally {
        await other.close();
      }
      t.clock.advance(ACCOUNT_TTL_MS - 1);
      assert.equal((await call(bearer(token))).statusCode, 200, 'the account read is still fresh');
      t.clock.advance(1);
      assertInvalidToken(await call(bearer(token)), pattern);
    });
  }

  it('refuses a remembered token once it expires', async () => {
    const token = await t.tokenFor(account, 'ShortLive');
    assert.equal((await call(bearer(token))).statusCode, 200);
    t.clock.advance(30_000);
    assertInvalidToken(await call(bearer(token)), /expired/);
  });

  it('never answers for one account with a token remembered for another', async () => {
    const other = await t.createAccount();
    const mine = await call(bearer(await t.tokenFor(account)));
    const theirs = await call(bearer(await t.tokenFor(other)));
    assert.equal(mine.json().accountId, account.row.id);
    assert.equal(theirs.json().accountId, other.row.id);
    assert.equal((await call(bearer(await t.tokenFor(account)))).json().accountId, account.row.id);
  });
});
