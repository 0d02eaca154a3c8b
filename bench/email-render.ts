/**
 * Email rendering alone, the per-recipient CPU of an email batch: the fixture (about 16 KB of
 * HTML, 50 tracked links, 3 tags) compiled once, then rendered for each recipient with its
 * own 52 tracking tokens (a click per link, the open pixel, the unsubscribe URL), as raw MIME,
 * a page of recipients at a time as a send job would. Then the same work's parts apart: the
 * tokens alone, and the MIME composition alone on a rendered message's two parts, both as
 * renderEmail does it (composeMime) and through the composer's streaming build(); and the
 * DKIM signing of each rendered message (nodemailer's signer, RSA-2048), as the send job
 * signs every message after rendering it.
 *
 *   node bench/email-render.ts
 *   BENCH_RECIPIENTS=5000 BENCH_PAGE=100 node bench/email-render.ts
 */
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { simpleParser } from 'mailparser';
import MailComposer, { type Options as MailComposerOptions } from 'nodemailer/lib/mail-composer';
import { compileEmail } from '../src/email/compile.ts';
import { composeMime, renderEmail } from '../src/email/render.ts';
import { recipientUrls, trackingKey } from '../src/email/tracking.ts';
import { generateKey, Keyring } from '../src/sealed.ts';
import { signEmail } from '../src/email/dkim.ts';

const RECIPIENTS = Number(process.env.BENCH_RECIPIENTS ?? 20_000);
const PAGE = Number(process.env.BENCH_PAGE ?? 200);
const PUBLIC_URL = 'https://herald.example.com';

const html = readFileSync(new URL('fixtures/email-newsletter.html', import.meta.url), 'utf8');
const key = trackingKey(new Keyring(generateKey()));

const compileStarted = performance.now();
const compiled = compileEmail(
  {
    subject: 'Spring news for [firstName]',
    preheader: 'Early access for [plan] members',
    html,
    from: { email: 'news@mail.localhost', displayName: 'Example Shop' },
    replyTo: { email: 'help@shop.example.com' },
  },
  { tracking: true },
);
const compileMs = performance.now() - compileStarted;

const SEND_ID = crypto.randomUUID();
const urlsOf = (recipientId: number) => recipientUrls(key, PUBLIC_URL, { recipientId, sendId: SEND_ID });

const recipient = (i: number) => ({
  to: `customer${i}@example.com`,
  sources: {
    own: { '[firstName]': `Customer ${i}` },
    properties: new Map([
      ['city', 'Zürich'],
      ['plan', i % 2 ? 'Gold' : 'Silver'],
    ]),
  },
  messageId: `<${i}.bench@mail.localhost>`,
  urls: urlsOf(i),
  date: new Date(),
});

async function pages(
  count: number,
  render: (i: number) => Promise<Buffer>,
): Promise<{ ms: number; cpuMs: number; bytes: number; peakRss: number }> {
  let peakRss = process.memoryUsage.rss();
  let bytes = 0;
  const started = performance.now();
  const cpuStarted = process.cpuUsage();
  for (let first = 0; first < count; first += PAGE) {
    const page: Promise<Buffer>[] = [];
    for (let i = first; i < Math.min(first + PAGE, count); i++) page.push(render(i));
    for (const message of await Promise.all(page)) bytes += message.length;
    peakRss = Math.max(peakRss, process.memoryUsage.rss());
  }
  const cpu = process.cpuUsage(cpuStarted);
  return { ms: performance.now() - started, cpuMs: (cpu.user + cpu.system) / 1000, bytes, peakRss };
}

const all = await pages(RECIPIENTS, (i) => renderEmail(compiled, recipient(i)));

const SAMPLE = Math.min(RECIPIENTS, 5000);
let tokensMs = performance.now();
for (let i = 0; i < SAMPLE; i++) {
  const urls = urlsOf(i);
  for (let link = 0; link < compiled.links.length; link++) urls.click(link);
}
tokensMs = performance.now() - tokensMs;
const parsed = await simpleParser(await renderEmail(compiled, recipient(0)));
const composerOptions = (i: number): MailComposerOptions => ({
  from: { name: 'Example Shop', address: 'news@mail.localhost' },
  to: `customer${i}@example.com`,
  subject: parsed.subject,
  messageId: `<${i}.bench@mail.localhost>`,
  text: { content: parsed.text, contentType: 'text/plain; charset=utf-8', contentTransferEncoding: 'quoted-printable' },
  html: {
    content: parsed.html as string,
    contentType: 'text/html; charset=utf-8',
    contentTransferEncoding: 'quoted-printable',
  },
});
const composed = await pages(SAMPLE, async (i) => composeMime(composerOptions(i)));
const built = await pages(SAMPLE, (i) => new MailComposer(composerOptions(i)).compile().build());
const dkimKey = {
  domain: 'mail.localhost',
  selector: 'bench',
  privateKey: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
};
const rendered = await Promise.all(
  Array.from({ length: Math.min(SAMPLE, 1000) }, (_, i) => renderEmail(compiled, recipient(i))),
);
const signed = await pages(SAMPLE, (i) => signEmail(rendered[i % rendered.length], dkimKey));

const perRecipient = (ms: number, count: number) => `${(ms / count).toFixed(3)} ms`;
console.log(
  `fixture: ${Buffer.byteLength(html)} bytes of HTML, ${compiled.links.length} tracked links, compiled once ` +
    `in ${compileMs.toFixed(1)} ms`,
);
console.log(
  `${RECIPIENTS} recipients in pages of ${PAGE}: ${Math.round(RECIPIENTS / (all.ms / 1000))} ` +
    `renders/s, ${perRecipient(all.cpuMs, RECIPIENTS)} of CPU each, ${Math.round(all.bytes / RECIPIENTS)} ` +
    `bytes each, peak RSS ${Math.round(all.peakRss / 2 ** 20)} MB`,
);
console.log(
  `apart, per recipient: ${perRecipient(tokensMs, SAMPLE)} for its ${compiled.links.length + 2} tracking ` +
    `tokens; ${perRecipient(composed.cpuMs, SAMPLE)} of CPU composing its MIME (composeMime), where the ` +
    `composer's own streaming build() takes ${perRecipient(built.cpuMs, SAMPLE)}; ` +
    `${perRecipient(signed.cpuMs, SAMPLE)} of CPU signing it with DKIM (RSA-2048)`,
);
