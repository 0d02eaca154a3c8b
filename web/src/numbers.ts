const formats = new Map<string, Intl.NumberFormat>();

/** A count or a rate in the account's locale (12,345 or 12.345), to at most one decimal. */
export function formatNumber(n: number, locale: string): string {
  let format = formats.get(locale);
  if (!format) {
    format = new Intl.NumberFormat(locale, { maximumFractionDigits: 1 });
    formats.set(locale, format);
  }
  return format.format(n);
}
