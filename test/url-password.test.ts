import assert from 'node:assert/strict';
import { createSecretKey, randomBytes } from 'node:crypto';
import { it } from 'node:test';
import { keptUrl, sealedIfClear, usableUrl } from '../src/url-password.ts';

// The credentials in a webhook URL, sealed where kept (src/url-password.ts): no storage.
const key = createSecretKey(randomBytes(32));
const lost = createSecretKey(randomBytes(32));

it('leaves a URL sealed under a key since lost as it is, to fail saying so, not sealed over', () => {
  const sealed = keptUrl(lost, 'https://hook:S3cret@hooks.example/x');
  assert.equal(sealedIfClear(key, sealed), undefined);
  assert.equal(usableUrl(key, sealed), undefined);
  assert.equal(usableUrl(lost, sealed), 'https://hook:S3cret@hooks.example/x');
});

it('seals, and posts with, a clear password that only begins as a sealed one does', () => {
  const clear = 'https://hook:v1%3Ashort@hooks.example/x';
  assert.equal(usableUrl(key, clear), clear, 'kept before passwords were sealed: used as it is');
  const sealed = sealedIfClear(key, clear);
  assert.ok(sealed && !sealed.includes('short'), sealed);
  assert.equal(usableUrl(key, sealed), clear);
  assert.equal(sealedIfClear(key, sealed), undefined, 'sealed once');
});
