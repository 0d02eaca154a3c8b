import { useMemo } from 'preact/hooks';
import { previewDocument } from '../preview.ts';

/**
 * An email's HTML in a sandboxed frame: `sandbox=""` runs no script, submits no form, opens
 * no window and gives the frame an origin of its own, so nothing in it reaches the console.
 */
export function HtmlPreview(props: { html: string; title: string }) {
  const { srcdoc, imagesLeftOut } = useMemo(() => previewDocument(props.html), [props.html]);
  const count = imagesLeftOut === 1 ? 'one image' : `${imagesLeftOut} images`;
  const images = imagesLeftOut === 0 ? '' : ` and ${count} from the web`;
  return (
    <figure class="preview">
      <iframe sandbox="" srcdoc={srcdoc} title={props.title} />
      <figcaption class="muted">
        Shown without its styles{images}: the console loads nothing from elsewhere. Links are not followed; hover one
        for its address.
      </figcaption>
    </figure>
  );
}
