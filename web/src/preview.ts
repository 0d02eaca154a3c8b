import { Parser } from 'htmlparser2';

/**
 * The preview frame's own policy. Its srcdoc also inherits the console's (HTML's policy
 * container), so whatever the cleaning below lets through still fetches nothing.
 */
export const FRAME_POLICY = "default-src 'none'; img-src data:";

/** Elements that fetch, run, style or redirect: left out with all they hold. */
const DROPPED = new Set([
  'script',
  'style',
  'link',
  'meta',
  'base',
  'iframe',
  'frame',
  'frameset',
  'object',
  'embed',
  'applet',
  'portal',
  'template',
  // SVG animation sets attributes, an <a>'s href among them, after the cleaning has run.
  'animate',
  'animatemotion',
  'animatetransform',
  'discard',
  'set',
]);

/** Attributes that name something to fetch or to post to. */
const FETCHING = new Set([
  'src',
  'srcset',
  'href',
  'xlink:href',
  'background',
  'poster',
  'data',
  'action',
  'formaction',
  'ping',
  'lowsrc',
  'dynsrc',
]);

/** Elements with no end tag. */
const VOID = new Set([
  'area',
  'base',
  'br',
  'col',
  'embed',
  'hr',
  'img',
  'input',
  'link',
  'meta',
  'source',
  'track',
  'wbr',
]);

const NAME = /^[a-z][a-z0-9:._-]*$/;

const escapeText = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const escapeAttribute = (value: string) => escapeText(value).replace(/"/g, '&quot;');

/** Whether the preview keeps an attribute of `tag` as it is. */
function kept(tag: string, name: string, value: string): boolean {
  if (name === 'style' || name.startsWith('on') || !NAME.test(name)) return false;
  if (!FETCHING.has(name)) return true;
  return tag === 'img' && name === 'src' && /^\s*data:image\//i.test(value);
}

/**
 * An email's HTML as the preview frame shows it. The console's CSP refuses inline styles and
 * anything from elsewhere, and logs each refusal as a browser error; the frame inherits it,
 * and even an inert DOMParser document has its inline styles checked against it. So the
 * HTML is rewritten as text, never parsed into a document here: scripts, styles and images
 * from elsewhere are left out (data: images stay); a link keeps its text and shows its
 * address as a tooltip, and is not followed.
 */
export function previewDocument(html: string): { srcdoc: string; imagesLeftOut: number } {
  let out = '';
  let imagesLeftOut = 0;
  /** Depth inside a dropped element: nothing in it is written. */
  let dropping = 0;
  const parser = new Parser(
    {
      onopentag(tag, attributes) {
        if (dropping > 0 || DROPPED.has(tag)) {
          dropping += 1;
          return;
        }
        if (!NAME.test(tag)) return;
        let written = `<${tag}`;
        for (const [name, value] of Object.entries(attributes)) {
          if (kept(tag, name, value)) written += ` ${name}="${escapeAttribute(value)}"`;
          else if (tag === 'img' && name === 'src') imagesLeftOut += 1;
        }
        const link = (tag === 'a' || tag === 'area') && attributes.href;
        if (link) written += ` title="${escapeAttribute(link)}"`;
        out += `${written}>`;
      },
      onclosetag(tag) {
        if (dropping > 0) {
          dropping -= 1;
          return;
        }
        if (NAME.test(tag) && !VOID.has(tag)) out += `</${tag}>`;
      },
      ontext(text) {
        if (dropping === 0) out += escapeText(text);
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true, recognizeSelfClosing: true },
  );
  parser.end(html);
  const policy = `<meta http-equiv="Content-Security-Policy" content="${escapeAttribute(FRAME_POLICY)}">`;
  return { srcdoc: `<!doctype html>${policy}${out}`, imagesLeftOut };
}
