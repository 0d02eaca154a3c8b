import assert from 'node:assert/strict';
import { it } from 'node:test';
import { FRAME_POLICY, previewDocument } from '../../web/src/preview.ts';

// The email preview's HTML (web/src/preview.ts): what the console's CSP would refuse, and log
// as a browser error, is left out before the frame sees it.
it('leaves out scripts, styles, event handlers and what they would fetch, keeping the text', () => {
  const { srcdoc, imagesLeftOut } = previewDocument(
    '<html><head><meta http-equiv="refresh" content="0;url=https://evil.example">' +
      '<link rel="stylesheet" href="https://cdn.example/a.css">' +
      '<style>p { color: red }</style><base href="https://evil.example/"></head>' +
      '<body onload="steal()"><h1 style="color: blue" class="big">Spring &lt;sale&gt;</h1>' +
      '<script>document.body.innerHTML = "pwned"</script><iframe src="https://evil.example"></iframe>' +
      '<object data="https://evil.example/x"><p>fallback</p></object>' +
      '<p background="https://cdn.example/bg.png">Dear [firstName]</p></body></html>',
  );
  assert.equal(imagesLeftOut, 0);
  const policy = `<meta http-equiv="Content-Security-Policy" content="${FRAME_POLICY}">`;
  assert.ok(srcdoc.startsWith(`<!doctype html>${policy}`), srcdoc);
  assert.match(srcdoc, /<h1 class="big">Spring &lt;sale&gt;<\/h1>/);
  assert.match(srcdoc, /<p>Dear \[firstName\]<\/p>/);
  const gone = ['refresh', 'stylesheet', 'color', 'evil', 'cdn', 'steal', 'pwned', 'fallback', 'style=', '<script'];
  for (const word of gone) assert.ok(!srcdoc.includes(word), `${word} is left out: ${srcdoc}`);
});

it('keeps data: images, counts the others left out, and shows a link its address without following it', () => {
  const { srcdoc, imagesLeftOut } = previewDocument(
    '<img src="https://images.example/banner.png" alt="Sale &quot;now&quot;"><img src="cid:logo" alt="Logo">' +
      '<img src="data:image/png;base64,iVBORw0KGgo=" alt="dot">' +
      '<img srcset="https://images.example/2x.png 2x" alt="x">' +
      '<a href="https://shop.example/?a=1&amp;b=2" onclick="go()">Shop now</a>' +
      '<svg><image href="https://images.example/s.png"/></svg>',
  );
  assert.equal(imagesLeftOut, 2, 'the https: and cid: sources');
  assert.match(srcdoc, /<img alt="Sale &quot;now&quot;">/);
  assert.match(srcdoc, /<img src="data:image\/png;base64,iVBORw0KGgo=" alt="dot">/);
  assert.match(srcdoc, /<a title="https:\/\/shop.example\/\?a=1&amp;b=2">Shop now<\/a>/);
  assert.match(srcdoc, /<svg><image><\/image><\/svg>/);
  assert.ok(!/https:\/\/images|srcset|href=|onclick|cid:/.test(srcdoc), srcdoc);
});

it('writes text back escaped, so markup in it stays text', () => {
  const { srcdoc } = previewDocument(
    '<p>&lt;script&gt;alert(1)&lt;/script&gt; &amp; more</p><p title="a&quot;><script>x</script>">t</p>',
  );
  assert.match(srcdoc, /<p>&lt;script&gt;alert\(1\)&lt;\/script&gt; &amp; more<\/p>/);
  assert.match(srcdoc, /<p title="a&quot;&gt;&lt;script&gt;x&lt;\/script&gt;">t<\/p>/);
});

it('leaves out SVG animation, which would set a link’s href after the cleaning', () => {
  const { srcdoc } = previewDocument(
    '<svg><a><set attributeName="href" to="/t/u/abc"/><animate attributeName="href" values="/t/c/x"/>' +
      '<text y="20">x</text></a></svg>',
  );
  assert.match(srcdoc, /<svg><a><text y="20">x<\/text><\/a><\/svg>/);
  assert.ok(!/set|animate|\/t\//.test(srcdoc.replace(/^<!doctype html><meta[^>]*>/, '')), srcdoc);
});
