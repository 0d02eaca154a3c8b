import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { emailAddressProblem } from '../../src/crm/email-address.ts';

describe('the email address rule (WHATWG "valid email address")', () => {
  for (const address of [
    'a@example.com',
    'first.last+tag@mail.example.co.uk',
    "o'brien@example.ie",
    'user@xn--bcher-kva.example',
    'x@localhost',
    `${'a'.repeat(64)}@example.com`,
  ]) {
    it(`accepts ${address}`, () => assert.equal(emailAddressProblem(address), undefined));
  }

  const refused: Array<[string, RegExp]> = [
    ['not-an-email', /^must be an email address$/],
    ['a@b@example.com', /^must be an email address$/],
    ['a b@example.com', /^must be an email address$/],
    ['a@-example.com', /^must be an email address$/],
    ['a@example..com', /^must be an email address$/],
    ['"quoted"@example.com', /^must be an email address$/],
    ['\ufffd\ufffd@x.co', /in ASCII/],
    ['user@bücher.example', /xn-- form/],
    ['josé@example.com', /in ASCII/],
    [`${'a'.repeat(65)}@example.com`, /at most 64/],
    [`a@${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(60)}.${'e'.repeat(60)}.${'f'.repeat(10)}.com`, /at most 254/],
  ];
  for (const [address, message] of refused) {
    it(`refuses ${address.slice(0, 40)}`, () => assert.match(emailAddressProblem(address) ?? 'accepted', message));
  }
});
