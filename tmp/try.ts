import { Registry } from 'prom-client';
import { startSmtpSink } from '../src/sim/smtp.ts';
import { smtpEmailTransport } from '../src/email/transports/smtp.ts';
import { parseSmtpUrl } from '../src/smtp-url.ts';
const sink = await startSmtpSink({ httpPort: null, rules: [
  { match: 'defer@x.test', action: 'defer', times: 1 },
  { match: 'hard@x.test', action: 'reject' },
  { match: 'full@x.test', action: 'reject', code: 552, status: '5.2.2' },
]});
const t = smtpEmailTransport(parseSmtpUrl(`smtp://127.0.0.1:${sink.port}`), { metrics: new Registry() });
const raw = Buffer.from('From: a@b.test\r\nTo: c@d.test\r\nSubject: hi\r\nMessage-ID: <1@b.test>\r\n\r\nhello\r\n');
for (const to of ['ok@x.test', 'defer@x.test', 'defer@x.test', 'hard@x.test', 'full@x.test'])
  console.log(to, await t.send({ accountId: 'a', sendId: 's', messageId: 'm', from: 'bounces+ab@b.test', to, raw }, new AbortController().signal));
sink.setFaults({ dropAfter: 1 });
console.log(await Promise.all(['a@x.test','b@x.test','c@x.test'].map(to => t.send({ accountId: 'a', sendId: 's', messageId: 'm', from: 'bounces+ab@b.test', to, raw }, new AbortController().signal))));
console.log(sink.received().map(m => [m.from, m.to]));
const t2 = smtpEmailTransport(parseSmtpUrl(`smtp://127.0.0.1:${sink.port}?tls=require`), { metrics: new Registry() });
console.log(await t2.send({ accountId: 'a', sendId: 's', messageId: 'm', from: 'bounces+ab@b.test', to: 'x@x.test', raw }, new AbortController().signal));
await t.close(); await t2.close(); await sink.close();
