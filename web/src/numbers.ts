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

/** Money as the API gives it, its amount exact (never rounded to a locale's format): `0.0325 EUR · 0.05 USD`. */
export function formatMoney(amounts: ReadonlyArray<{ amount: string; currency: string }>): string {
  return amounts.map((money) => `${money.amount} ${money.currency}`).join(' · ') || '—';
}
