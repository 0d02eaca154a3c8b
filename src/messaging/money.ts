/**
 * Money as the API shows it, `{amount, currency}` (ARCHITECTURE.md, "Beyond the spec, second
 * round"): `amount` a decimal string, `currency` ISO 4217. Stored in integer micro-units (a
 * millionth of the currency's unit), so sums are exact and a price like 0.0075 stays whole.
 */
export interface Money {
  amount: string;
  currency: string;
}

const MICROS_PER_UNIT = 1_000_000;
/**
 * Six decimals at most: micro-units are the smallest step stored. Below 100,000: a price per part
 * that high (a hundred thousand rials is two dollars) times the parts of a busy account's day
 * stays far within a 64-bit sum of micro-units, which PostgreSQL refuses to pass.
 */
const DECIMAL = /^(\d{1,5})(?:\.(\d{1,6}))?$/;
const CURRENCY = /^[A-Z]{3}$/;

/** Micro-units of a decimal string from 0 to 99,999.999999 with at most six decimals; undefined for another string. */
export function microsOf(amount: string): number | undefined {
  const match = DECIMAL.exec(amount);
  if (!match) return undefined;
  return Number(match[1]) * MICROS_PER_UNIT + Number((match[2] ?? '').padEnd(6, '0'));
}

/**
 * The decimal string of an amount in micro-units: two decimals at least, and no trailing zeros
 * beyond. A bigint for a sum that may pass 2^53 micro-units (a dry run's estimate), exact.
 */
export function amountOf(micros: number | bigint): string {
  const exact = BigInt(micros);
  const sign = exact < 0n ? '-' : '';
  const whole = exact < 0n ? -exact : exact;
  const units = whole / BigInt(MICROS_PER_UNIT);
  const fraction = String(whole % BigInt(MICROS_PER_UNIT))
    .padStart(6, '0')
    .replace(/0{1,4}$/, '');
  return `${sign}${units}.${fraction}`;
}

export const isCurrency = (code: string): boolean => CURRENCY.test(code);

export const money = (micros: number, currency: string): Money => ({ amount: amountOf(micros), currency });
