import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { formatNumber } from '../numbers.ts';
import { formatTime, zoneOf, type Zone } from '../time.ts';

export const ZoneContext = createContext<Zone>(zoneOf('UTC+00:00~Coordinated Universal Time', 'en'));

export const useZone = () => useContext(ZoneContext);

/** An instant in the account's offset, with the UTC instant for machines. */
export function Time(props: { at: string | null }) {
  const zone = useZone();
  if (props.at === null) return <span>—</span>;
  return <time dateTime={props.at}>{formatTime(props.at, zone)}</time>;
}

/** Formats counts in the account's locale. */
export function useNumber(): (n: number) => string {
  const { locale } = useZone();
  return (n) => formatNumber(n, locale);
}

/** A count in the account's locale. */
export function Num(props: { n: number }) {
  return <>{useNumber()(props.n)}</>;
}
