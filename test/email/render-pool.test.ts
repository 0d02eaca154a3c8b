import assert from 'node:assert/strict';
import { createSecretKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { after, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { RenderPool } from '../../src/email/render-pool.ts';
import { compileEmail } from '../../src/email/compile.ts';
import { renderEmail } from '../../src/email/render.ts';
import { recipientUrls } from '../../src/email/tracking.ts';
import { Keyring } from '../../src/sealed.ts';

// The render pool's threads against the renderer and signer run in place: the same messages, in order.
const pool = new RenderPool(2);
after(() => pool.close());

const tracking = new Keyring(createSecretKey(randomBytes(32)));
const publicUrl = 'https://herald.example';
const dkimKey = {
  domain: 'mail.localhost',
  selector: 'pool-test',
  privateKey: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
};
const compiled = compileEmail(
  {
    subject: 'News for [firstName]',
    preheader: 'For [plan] members',
    html: '<p>Hi [firstName], see <a href="https://shop.example/a">this</a>.</p>',
    from: { email: 'news@mail.localhost', displayName: 'News' },
  },
  { tracking: true },
);
const recipients = Array.from({ length: 60 }, (_, i) => ({
  recipientId: 1000 + i,
  to: `r${i}@example.com`,
  sources: {
    own: i % 2 ? { '[firstName]': `Own ${i}` } : null,
    properties: new Map([
      ['firstname', `Contact ${i}`],
      ['plan', 'Gold'],
    ]),
  },
  messageId: `<m${i}@mail.localhost>`,
}));
const date = new Date('2026-01-02T03:04:05Z');
const sendId = '0190a2b4-0000-7000-8000-000000000001';

it(
  'renders and signs on its threads what the renderer and signer do in place, each recipient’s message in the ' +
    'order given',
  async () => {
    const renderer = pool.open({
      compiled,
      sendId,
      trackingKey: tracking.current,
      publicUrl,
      mailboxDomain: 'bounces.example',
      dkimKey,
    });
    const groups = [recipients.slice(0, 25), recipients.slice(25, 50), recipients.slice(50)];
    const raws = (await Promise.all(groups.map((group) => renderer.render(group, date)))).flat();
    renderer.close();
    assert.equal(raws.length, recipients.length);
    for (const [i, r] of recipients.entries()) {
      const inPlace = await simpleParser(
        await renderEmail(compiled, {
          to: r.to,
          sources: r.sources,
          messageId: r.messageId,
          urls: recipientUrls(tracking, publicUrl, { recipientId: r.recipientId, sendId }, 'bounces.example'),
          date,
        }),
      );
      const threaded = await simpleParser(raws[i]);
      assert.equal(threaded.messageId, r.messageId);
      assert.equal(threaded.subject, inPlace.subject);
      assert.equal(threaded.html, inPlace.html);
      assert.equal(threaded.text, inPlace.text);
      assert.equal(threaded.headers.get('list-unsubscribe'), inPlace.headers.get('list-unsubscribe'));
      assert.equal(threaded.date!.getTime(), date.getTime());
      const signature = threaded.headerLines.find((h) => h.key === 'dkim-signature')?.line.replace(/\r\n\s+/g, ' ');
      assert.match(signature ?? '', /\bd=mail\.localhost;.*\bs=pool-test;/, 'signed with the batch’s key');
    }
  },
);

it('rejects a call its thread cannot render, and renders the next', async () => {
  const broken = pool.open({
    compiled: {
      ...compiled,
      html: { pieces: ['a', 'b'], encoded: ['a', 'b'], slots: [999] },
      text: undefined as never,
    },
    sendId,
    trackingKey: tracking.current,
    publicUrl,
    mailboxDomain: 'bounces.example',
    dkimKey,
  });
  await assert.rejects(broken.render(recipients.slice(0, 2), date), /^Error: rendering failed: /);
  broken.close();
  const renderer = pool.open({
    compiled,
    sendId,
    trackingKey: tracking.current,
    publicUrl,
    mailboxDomain: 'bounces.example',
    dkimKey,
  });
  const [raw] = await renderer.render(recipients.slice(0, 1), date);
  assert.equal((await simpleParser(raw)).messageId, recipients[0].messageId);
  renderer.close();
});
