import assert from 'node:assert/strict';
import { it } from 'node:test';
import { simpleParser, type ParsedMail } from 'mailparser';
import MailComposer, { type Options as MailComposerOptions } from 'nodemailer/lib/mail-composer';
import { MAX_TRACKED_LINKS } from '../../src/email/tracking-tokens.ts';
import { compileEmail, UNSUBSCRIBE_TAG } from '../../src/email/compile.ts';
import { composeMime, renderEmail, type EmailContent, type RecipientUrls } from '../../src/email/render.ts';
import type { TagSources } from '../../src/messaging/tags.ts';

const from = { email: 'news@mail.localhost', displayName: 'Zoë at Herald' };
const urls = (id: string, mailto = true): RecipientUrls => ({
  click: (index) => `https://herald.example/t/c/${id}-${index}`,
  open: `https://herald.example/t/o/${id}`,
  unsubscribe: `https://herald.example/t/u/${id}`,
  ...(mailto ? { unsubscribeMailto: `mailto:unsubscribe+${id}@bounces.example` } : {}),
});

const page = (body: string) => `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>[firstName]'s news</title>
<style>a[x-apple-data-detectors] { color: inherit } [data-ogsc] .dark { color: #fff }</style></head>
<body style="margin:0">${body}</body></html>`;

async function render(
  content: Partial<EmailContent> & Pick<EmailContent, 'html'>,
  sources: TagSources,
  options = { tracking: true },
  id = 'r1',
) {
  const compiled = compileEmail({ subject: 'Hello', from, ...content }, options);
  const raw = await renderEmail(compiled, {
    to: 'ada@example.com',
    sources,
    messageId: `<${id}@mail.localhost>`,
    urls: urls(id),
    date: new Date('2025-03-04T05:06:07Z'),
  });
  return { compiled, raw, mail: await simpleParser(raw) };
}

const bodyOf = (mail: ParsedMail) => /<body[^>]*>([\s\S]*)<\/body>/.exec(mail.html as string)![1];
const hrefs = (html: string) => [...html.matchAll(/<a\b[^>]*?href="([^"]*)"/g)].map((m) => m[1]);

it(
  'builds multipart/alternative UTF-8 text and HTML with the sender, reply-to, Message-ID, Date and both ' +
    'List-Unsubscribe headers',
  async () => {
    const { raw, mail } = await render(
      {
        subject: 'News for [firstName]',
        html: page('<p>Hi</p>'),
        replyTo: { email: 'help@example.com', displayName: 'Help desk' },
      },
      { own: { '[firstName]': 'Åsa' } },
    );
    assert.match(raw.toString(), /^Content-Type: multipart\/alternative;/m);
    assert.match(raw.toString(), /^Content-Type: text\/plain; charset=utf-8$/m);
    assert.match(raw.toString(), /^Content-Type: text\/html; charset=utf-8$/m);
    assert.equal(raw.toString().match(/^Content-Transfer-Encoding: quoted-printable$/gm)?.length, 2);
    assert.equal(mail.subject, 'News for Åsa');
    assert.match(raw.toString(), /^Subject: =\?UTF-8\?/m, 'the subject is encoded');
    assert.deepEqual(mail.from!.value, [{ address: 'news@mail.localhost', name: 'Zoë at Herald' }]);
    assert.deepEqual((mail.replyTo as { value: unknown }).value, [{ address: 'help@example.com', name: 'Help desk' }]);
    assert.equal((mail.to as { text: string }).text, 'ada@example.com');
    assert.equal(mail.messageId, '<r1@mail.localhost>');
    assert.equal(mail.date!.toISOString(), '2025-03-04T05:06:07.000Z');
    const lines = Object.fromEntries(mail.headerLines.map((h) => [h.key, h.line.replace(/\r\n\s+/g, ' ')]));
    assert.equal(
      lines['list-unsubscribe'],
      'List-Unsubscribe: <https://herald.example/t/u/r1>, <mailto:unsubscribe+r1@bounces.example>',
    );
    assert.equal(lines['list-unsubscribe-post'], 'List-Unsubscribe-Post: List-Unsubscribe=One-Click');
  },
);

it('tracks the first 65,536 distinct links of a message and leaves those after them as they are', async () => {
  const html = Array.from({ length: MAX_TRACKED_LINKS + 2 }, (_, i) => `<a href="https://example.com/${i}">x</a>`);
  const { compiled, mail } = await render({ html: page(html.join('') + html[0]) }, {});
  assert.equal(compiled.links.length, MAX_TRACKED_LINKS);
  const sent = hrefs(bodyOf(mail));
  assert.deepEqual(
    sent.filter((href) => href.startsWith('https://example.com/')),
    [`https://example.com/${MAX_TRACKED_LINKS}`, `https://example.com/${MAX_TRACKED_LINKS + 1}`],
    'the two past the bound as written',
  );
  const clicks = sent.filter((href) => href.startsWith('https://herald.example/t/c/'));
  assert.equal(clicks.length, MAX_TRACKED_LINKS + 1, 'the rest tracked, the first link twice');
});

it('writes List-Unsubscribe with the https URL alone when there is no mailto', async () => {
  const compiled = compileEmail(
    { subject: 'Hello', from: { email: 'news@mail.localhost' }, html: '<p>Hi</p>' },
    { tracking: true },
  );
  const mail = await simpleParser(
    await renderEmail(compiled, {
      to: 'ada@example.com',
      sources: {},
      messageId: '<m@mail.localhost>',
      urls: urls('r2', false),
      date: new Date(),
    }),
  );
  const line = mail.headerLines.find((h) => h.key === 'list-unsubscribe')!.line;
  assert.equal(line, 'List-Unsubscribe: <https://herald.example/t/u/r2>');
  assert.deepEqual(mail.from!.value, [{ address: 'news@mail.localhost', name: '' }]);
  assert.equal(mail.replyTo, undefined);
});

it('puts the preheader first in the body, hidden, and leaves it out of the text', async () => {
  const { mail } = await render(
    { preheader: 'Your [plan] renews soon', html: page('<h1>Welcome</h1><p>Body</p>') },
    { own: { '[plan]': 'Gold' } },
  );
  const first = /^<div style="([^"]*)">([^<]*)<\/div>/.exec(bodyOf(mail));
  assert.ok(first, bodyOf(mail));
  assert.match(first[1], /display:none/);
  assert.match(first[1], /mso-hide:all/);
  assert.equal(first[2], 'Your Gold renews soon');
  assert.ok(!(mail.text as string).includes('renews'), mail.text);
  const none = await render({ html: page('<p>Body</p>') }, {});
  assert.ok(bodyOf(none.mail).startsWith('<p>Body</p>'), 'no preheader, no element');
});

it('fills tags in the subject, preheader, HTML and text, HTML-escaped in the HTML only', async () => {
  const sources: TagSources = {
    own: { '[firstName]': '<script>alert("x")</script> & Co' },
    properties: new Map([['city', "O'Hare <b>"]]),
  };
  const { mail } = await render(
    {
      subject: 'Hi [firstName] from [City]',
      preheader: '[firstName]!',
      html: page(
        '<h2>Dear [firstName],</h2><p title="[city]">Weather in [CITY]: [unknownTag]sunny</p><img ' +
          'src="https://cdn.example/a.png" alt="[firstName]">',
      ),
    },
    sources,
  );
  assert.equal(mail.subject, `Hi <script>alert("x")</script> & Co from O'Hare <b>`);
  const html = mail.html as string;
  assert.ok(!html.includes('<script>') && !html.includes('<b>'), 'no value becomes markup');
  assert.ok(html.includes('<h2>Dear &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; Co,</h2>'), html);
  assert.ok(html.includes(`<p title="O&#39;Hare &lt;b&gt;">Weather in O&#39;Hare &lt;b&gt;: sunny</p>`), html);
  assert.ok(html.includes(`alt="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; Co"`), html);
  assert.ok(
    html.includes('<div style="display:none;') &&
      html.includes('>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; Co!</div>'),
    'the preheader too',
  );
  assert.ok(html.includes(`<title>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; Co's news</title>`), html);
  const text = mail.text as string;
  assert.ok(text.includes(`Dear <script>alert("x")</script> & Co,`), text);
  assert.ok(text.includes(`Weather in O'Hare <b>: sunny`), text);
  assert.ok(!/\[(firstName|city|CITY|unknownTag)\]/.test(text), `no tag is left: ${text}`);
});

it('keeps brackets that are not tags: CSS attribute selectors and conditional comments', async () => {
  const html = page(
    '<!--[if mso]><table><tr><td>[firstName]</td></tr></table><![endif]--><p>[firstName]</p><script ' +
      'type="application/ld+json">{"a":[1]}</script>',
  );
  const { mail } = await render({ html }, { own: { '[firstName]': 'Ada' } });
  const out = mail.html as string;
  assert.ok(out.includes('a[x-apple-data-detectors] { color: inherit } [data-ogsc] .dark'), out);
  assert.ok(out.includes('<!--[if mso]><table><tr><td>[firstName]</td></tr></table><![endif]-->'), out);
  assert.ok(out.includes('{"a":[1]}'), out);
  assert.ok(out.includes('<p>Ada</p>'), out);
});

it(
  'tracks http(s) links, each URL once, by index in order; leaves mailto, tel, anchors, relative links and links ' +
    'with a tag',
  async () => {
    const body = `<p><a href="https://shop.example/sale?utm=mail&amp;x=1" class="button">Sale</a>
    <a href=" HTTP://Example.com/Upper ">upper</a>
    <a href="mailto:help@example.com">mail us</a> <a href="tel:+4420123">call</a> <a href="#top">top</a>
    <a href="/relative">relative</a> <a href="https://shop.example/me?c=[contactId]">yours</a>
    <a href="javascript:void(0)">js</a> <a name="x">no href</a>
    <a href="https://shop.example/sale?utm=mail&amp;x=1">sale again</a> <a href="https://blog.example/">blog</a></p>`;
    const { compiled, mail } = await render({ html: page(body) }, { own: { '[contactId]': 'c&42' } });
    assert.deepEqual(compiled.links, [
      'https://shop.example/sale?utm=mail&x=1',
      'HTTP://Example.com/Upper',
      'https://blog.example/',
    ]);
    const html = mail.html as string;
    assert.deepEqual(hrefs(bodyOf(mail)), [
      'https://herald.example/t/c/r1-0',
      'https://herald.example/t/c/r1-1',
      'mailto:help@example.com',
      'tel:+4420123',
      '#top',
      '/relative',
      'https://shop.example/me?c=c&amp;42',
      'javascript:void(0)',
      'https://herald.example/t/c/r1-0',
      'https://herald.example/t/c/r1-2',
      'https://herald.example/t/u/r1',
    ]);
    assert.ok(
      html.includes('<a href="https://herald.example/t/c/r1-0" class="button">Sale</a>'),
      'other attributes kept',
    );
    assert.ok(!html.includes('shop.example/sale'), 'the original URL is not in the message');
    const text = mail.text as string;
    assert.ok(text.includes('Sale [https://herald.example/t/c/r1-0]'), text);
    assert.ok(text.includes('blog [https://herald.example/t/c/r1-2]'), text);
    assert.ok(text.includes('yours [https://shop.example/me?c=c&42]'), text);
    assert.ok(!text.includes('shop.example/sale'), text);
  },
);

it(
  'puts the open pixel last in the body, and an unsubscribe ' + 'footer when the HTML has no [unsubscribeUrl]',
  async () => {
    const { mail } = await render({ html: page('<p>Hi</p>') }, {});
    const body = bodyOf(mail);
    assert.match(
      body,
      new RegExp(
        /<a href="https:\/\/herald\.example\/t\/u\/r1"[^>]*>Unsubscribe<\/a><\/p>/.source +
          /<img src="https:\/\/herald\.example\/t\/o\/r1" width="1" height="1" alt=""[^>]*\/>$/.source,
      ),
    );
    assert.ok((mail.text as string).includes('Unsubscribe [https://herald.example/t/u/r1]'), mail.text as string);
    assert.ok(!(mail.text as string).includes('/t/o/'), 'no pixel in the text');
  },
);

it('puts the unsubscribe URL where the HTML asks for it, and then adds no footer', async () => {
  const html = page(`<p><a href="${UNSUBSCRIBE_TAG}">Leave this list</a> or paste ${UNSUBSCRIBE_TAG}</p>`);
  const { mail } = await render({ html }, { own: { [UNSUBSCRIBE_TAG]: 'https://evil.example/' } });
  const out = mail.html as string;
  assert.ok(
    out.includes(
      '<a href="https://herald.example/t/u/r1">Leave this list</a> or paste https://herald.example/t/u/r1</p>',
    ),
    out,
  );
  assert.ok(!out.includes('>Unsubscribe</a>') && !out.includes('evil'), out);
  assert.ok((mail.text as string).includes('Leave this list [https://herald.example/t/u/r1]'), mail.text as string);
});

it('gives the text the unsubscribe URL even when the HTML holds it where text has no place', async () => {
  const { mail } = await render(
    { html: page(`<img src="https://cdn.example/banner.png" alt="${UNSUBSCRIBE_TAG}">`) },
    {},
  );
  assert.equal(mail.text, 'Unsubscribe: https://herald.example/t/u/r1');
  assert.ok((mail.html as string).includes('alt="https://herald.example/t/u/r1"'));
  const { mail: worded } = await render(
    { html: page(`<p>Hello</p><img src="https://cdn.example/banner.png" alt="${UNSUBSCRIBE_TAG}">`) },
    {},
  );
  assert.equal(worded.text, 'Hello\n\nUnsubscribe: https://herald.example/t/u/r1');
  const { mail: tagged } = await render(
    { html: page(`<p>Hi [name] and all</p><img src="https://cdn.example/banner.png" alt="${UNSUBSCRIBE_TAG}">`) },
    { own: { '[name]': 'Ada' } },
  );
  assert.equal(tagged.text, 'Hi Ada and all\n\nUnsubscribe: https://herald.example/t/u/r1');
});

it('with tracking off, rewrites no link and adds no pixel, but keeps the unsubscribe link', async () => {
  const { compiled, mail } = await render(
    { html: page('<p><a href="https://shop.example/">Shop</a></p>') },
    {},
    { tracking: false },
  );
  assert.deepEqual(compiled.links, []);
  assert.deepEqual(hrefs(bodyOf(mail)), ['https://shop.example/', 'https://herald.example/t/u/r1']);
  assert.ok(!(mail.html as string).includes('<img'));
  assert.ok((mail.text as string).includes('Shop [https://shop.example/]'));
  assert.ok(mail.headerLines.some((h) => h.key === 'list-unsubscribe-post'));
});

it('keeps headings in their case in the text, and reads layout table cells apart', async () => {
  const { mail } = await render(
    { html: page('<h1>Spring Sale</h1><h3>Only [days] days</h3><table><tr><td>Left</td><td>Right</td></tr></table>') },
    { own: { '[days]': 'three' } },
  );
  const text = mail.text as string;
  assert.ok(text.includes('Spring Sale') && text.includes('Only three days'), text);
  assert.ok(!text.includes('SPRING'), text);
  assert.match(text, /Left\s*\n\s*Right/);
});

it('renders an HTML fragment: the preheader at its start, footer and pixel at its end', async () => {
  const { mail } = await render(
    { preheader: 'Pre', html: '<p>Just a <a href="https://x.example/">fragment</a></p>' },
    {},
  );
  const html = mail.html as string;
  assert.match(
    html,
    new RegExp(
      /^<div style="display:none;[^"]*">Pre<\/div>/.source +
        /<p>Just a <a href="https:\/\/herald\.example\/t\/c\/r1-0">fragment<\/a><\/p>/.source +
        /<p [^>]*><a href="https:\/\/herald\.example\/t\/u\/r1"[^>]*>Unsubscribe<\/a><\/p>/.source +
        /<img src="https:\/\/herald\.example\/t\/o\/r1"[^>]*\/>$/.source,
    ),
  );
});

it('renders each recipient from one compiled batch, and no value reaches the headers as a header', async () => {
  const compiled = compileEmail({ subject: 'For [name]', from, html: page('<p>Hi [name]</p>') }, { tracking: true });
  const a = await simpleParser(
    await renderEmail(compiled, {
      to: 'a@example.com',
      sources: { own: { '[name]': 'Ann\r\nBcc: victim@example.com' } },
      messageId: '<a@mail.localhost>',
      urls: urls('a'),
      date: new Date(),
    }),
  );
  const b = await simpleParser(
    await renderEmail(compiled, {
      to: 'b@example.com',
      sources: { own: { '[name]': 'Bob' } },
      messageId: '<b@mail.localhost>',
      urls: urls('b'),
      date: new Date(),
    }),
  );
  assert.equal(a.bcc, undefined);
  assert.ok(!a.headerLines.some((h) => h.key === 'bcc'));
  assert.match(a.subject!, /^For Ann\s*Bcc: victim@example\.com$/);
  assert.equal(b.subject, 'For Bob');
  assert.ok((b.html as string).includes('<p>Hi Bob</p>') && (b.html as string).includes('/t/o/b"'));
  assert.ok(!(b.html as string).includes('/t/o/a"'));
});

it('removes the two noncharacters it marks holes with from the HTML it is given', async () => {
  const { mail } = await render({ html: page('<p>a\uFDD00\uFDD1b [x]</p>') }, { own: { '[x]': 'X' } });
  assert.ok((mail.html as string).includes('<p>a0b X</p>'));
  assert.ok((mail.text as string).includes('a0b X'), mail.text as string);
});

it("writes exactly what nodemailer's composer builds, for every kind of text", async () => {
  const link = '<a href="https://herald.example.com/t/c/AAAAAAAAAAAAAAAAAAAAAAAAAAAA">link</a> ';
  const texts = [
    'plain ASCII',
    'Zoë, Łódź, 東京 and 😀 — ünïcødé',
    `${'x'.repeat(75)}=${'y'.repeat(200)}\n${'z'.repeat(1200)}`,
    'trailing spaces   \ntab\t\nend with space ',
    'CRLF\r\nlines\r\n\r\nand a lone\rCR and\nLF\n',
    '.dot at start\n..two\nFrom me\n=3D already\n',
    `<p style="margin:0">${link.repeat(30)}</p>`,
  ];
  for (const [i, text] of texts.entries()) {
    const html = `<p>${texts[(i + 3) % texts.length]}</p>`;
    const options: MailComposerOptions = {
      baseBoundary: 'fixedboundary0123',
      from: { name: 'Zoë at Herald', address: 'news@mail.localhost' },
      replyTo: { name: '', address: 'help@example.com' },
      to: 'ada@example.com',
      subject: `Subject ${text.slice(0, 100)}`,
      messageId: `<${i}@mail.localhost>`,
      date: new Date('2025-03-04T05:06:07Z'),
      text: { content: text, contentType: 'text/plain; charset=utf-8', contentTransferEncoding: 'quoted-printable' },
      html: { content: html, contentType: 'text/html; charset=utf-8', contentTransferEncoding: 'quoted-printable' },
      headers: {
        'List-Unsubscribe': '<https://herald.example.com/t/u/x>, <mailto:unsubscribe+x@bounces.example>',
        'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
      },
    };
    const built = await new MailComposer(options).compile().build();
    assert.equal(composeMime(options).toString('latin1'), built.toString('latin1'), `text ${i}`);
  }
});

it('refuses to write a message of another shape than multipart/alternative of quoted-printable text', () => {
  const base: MailComposerOptions = { from: 'news@mail.localhost', to: 'ada@example.com', subject: 'S' };
  const qp = (content: string) => ({ content, contentTransferEncoding: 'quoted-printable' });
  assert.throws(() => composeMime({ ...base, text: qp('only text') }), TypeError);
  assert.throws(
    () => composeMime({ ...base, text: 'text', html: { content: '<p>x</p>', contentTransferEncoding: 'base64' } }),
    TypeError,
  );
  assert.throws(
    () =>
      composeMime({
        ...base,
        text: qp('text'),
        html: qp('<p>x</p>'),
        attachments: [{ filename: 'a.txt', content: 'a' }],
      }),
    TypeError,
  );
});

it(
  'encodes the batch’s pieces once and each recipient’s values apart, and the parts decode to exactly the text ' +
    'filled in',
  async () => {
    // Whitespace that ends a piece or a value, letters beyond ASCII on both sides of a tag, a
    // line longer than quoted-printable's 76 and an `=`: each joint of pieces and values.
    const words = 'lang '.repeat(30);
    const body = `<p>Grüße [firstName] \t</p><p>${words}[city]=ü [plan]</p><a href="[unsubscribeUrl]">ab</a>`;
    const { mail } = await render(
      { html: page(body) },
      { own: { '[firstName]': 'Zoë ', '[city]': ' Köln\t', '[plan]': '=3D' } },
      { tracking: false },
    );
    assert.equal(
      bodyOf(mail),
      `<p>Grüße Zoë  \t</p><p>${'lang '.repeat(30)} Köln\t=ü =3D</p><a href="https://herald.example/t/u/r1">ab</a>`,
    );
    assert.match(mail.text!, /^Grüße Zoë/);
  },
);

it('writes every line break of the HTML and the tags as CRLF on the wire: a lone CR would break DKIM', async () => {
  const { raw, mail } = await render(
    { html: page('<p>Dear [firstName],\rsee you\r\nsoon.</p>'), preheader: 'For [firstName]' },
    { own: { '[firstName]': 'Ada\rLovelace' } },
  );
  assert.doesNotMatch(raw.toString(), /\r(?!\n)/);
  assert.match(mail.html as string, /Dear Ada\nLovelace,\nsee you\nsoon\./);
  assert.match(mail.text ?? '', /Dear Ada\nLovelace, see you soon\./);
});

it('renders HTML nested thousands deep (unclosed tags, as some editors leave) with its text part', async () => {
  const { mail } = await render(
    { html: page(`<p>Hi [firstName]</p>${'<font>'.repeat(20_000)}deep`) },
    {
      own: { '[firstName]': 'Ada' },
    },
  );
  assert.match(mail.text ?? '', /^Hi Ada/);
  assert.match(mail.html as string, /deep/);
});

it('folds a subject whose tag value has no whitespace for thousands of characters: no line past 78', async () => {
  const code = `https://shop.example/${'A'.repeat(2000)}`;
  const { raw, mail } = await render(
    { html: page('<p>Hi</p>'), subject: 'Your link: [code] ok' },
    { own: { '[code]': `for\nyou ${code}` } },
  );
  const head = raw.toString().split('\r\n\r\n')[0];
  assert.ok(Math.max(...head.split('\r\n').map((line) => line.length)) <= 78, head);
  assert.equal(mail.subject, `Your link: for you ${code} ok`, 'a line break of a tag becomes a space');
});
