import { useNumber } from './zone.tsx';

const GOOD = new Set(['Delivered', 'Completed', 'delivered', 'Open', 'Click']);
const BAD = new Set(['Failed', 'Bounce', 'Dropped', 'NotSent', 'failed', 'Spam Report', 'Cancelled']);

/** A status word, coloured by how it went; the word itself carries the meaning, the colour only helps. */
export function Status(props: { word: string }) {
  const tone = GOOD.has(props.word) ? 'good' : BAD.has(props.word) ? 'bad' : 'neutral';
  return <span class={`status status-${tone}`}>{props.word}</span>;
}

/** `Delivered 3 · Failed 1`: a send's recipients by status word. */
export function TotalsText(props: { totals: Record<string, number> }) {
  const number = useNumber();
  const entries = Object.entries(props.totals);
  if (entries.length === 0) return <span class="muted">no recipients</span>;
  return <span>{entries.map(([word, n]) => `${word} ${number(n)}`).join(' · ')}</span>;
}
