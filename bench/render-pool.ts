/**
 * The render pool alone (src/email/render-pool.ts): its threads render and DKIM-sign the
 * fixture (bench/fixtures/email-newsletter.html, tracking on) for BENCH_RECIPIENTS recipients
 * (6,000), in groups of 25 with two groups in flight per thread, as a send job gives them; it
 * prints messages/s and this process's peak resident memory over its start. Nothing else runs:
 * the threads' own speed and cost, apart from the database and the transport.
 *
 *   node bench/render-pool.ts         # as many threads as EMAIL_RENDER_THREADS's default
 *   node bench/render-pool.ts 1       # one thread
 */
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadConfig } from '../src/config.ts';
import { RenderPool } from '../src/email/render-pool.ts';
import { compileEmail } from '../src/email/compile.ts';
import { trackingKey } from '../src/email/tracking.ts';
import { generateKey, Keyring } from '../src/sealed.ts';

const THREADS = Number(process.argv[2] ?? loadConfig({}).emailRenderThreads);
const RECIPIENTS = Number(process.env.BENCH_RECIPIENTS ?? 6000);
const GROUP = 25;

const html = readFileSync(new URL('fixtures/email-newsletter.html', import.meta.url), 'utf8');
const compiled = compileEmail(
  {
    subject: 'Spring news for [firstName]',
    preheader: 'Early access for [plan] members',
    html,
    from: { email: 'news@mail.localhost', displayName: 'Example Shop' },
  },
  { tracking: true },
);
const dkimKey = {
  domain: 'mail.localhost',
  selector: 'bench',
  privateKey: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
};
const pool = new RenderPool(THREADS);
const renderer = pool.open({
  compiled,
  sendId: crypto.randomUUID(),
  trackingKey: trackingKey(new Keyring(generateKey())).current,
  publicUrl: 'https://herald.example.com',
  mailboxDomain: undefined,
  dkimKey,
});

const startRss = process.memoryUsage.rss();
let peakRss = startRss;
let next = 0;
async function lane(): Promise<void> {
  while (next < RECIPIENTS) {
    const first = next;
    next += GROUP;
    const recipients = Array.from({ length: Math.min(GROUP, RECIPIENTS - first) }, (_, i) => ({
      recipientId: first + i,
      to: `customer${first + i}@example.com`,
      sources: { own: { '[firstName]': `Customer ${first + i}` }, properties: new Map([['plan', 'Gold']]) },
      messageId: `<${first + i}.bench@mail.localhost>`,
    }));
    await renderer.render(recipients, new Date());
    peakRss = Math.max(peakRss, process.memoryUsage.rss());
  }
}
const started = performance.now();
await Promise.all(Array.from({ length: THREADS * 2 }, lane));
const seconds = (performance.now() - started) / 1000;
const mib = (bytes: number) => Math.round(bytes / 2 ** 20);
console.log(
  `${THREADS} render thread(s): ${Math.round(RECIPIENTS / seconds)} messages/s rendered and signed; peak ` +
    `RSS ${mib(peakRss)} MiB (${mib(startRss)} at the start)`,
);
renderer.close();
await pool.close();
