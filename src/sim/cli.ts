/** `herald sim smsc [options]`: the command-line face of startSmsc, running until SIGINT or SIGTERM. */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { FINAL_STATES, startSmsc, type FinalState, type IdFormat, type SmscOptions } from './smsc.ts';

export const SIM_SMSC_ARGS = `[--port 2775] [--http-port 2776] [--host 127.0.0.1] [--system-id ID --password PW]
  [--tls-cert cert.pem --tls-key key.pem (SMPP over TLS, port 3550 by default)]
  [--receipt-delay-ms 1000] [--delivered 0.95 --undelivered 0.03 --rejected --expired --deleted --unknown]
  [--enroute] [--receipt-before-response] [--tps N] [--account-tps N] [--throttled SHARE] [--queue-full SHARE]
  [--reject-numbers REGEX [--reject-status 0x0B]] [--drop-after N] [--id-format decimal|hex]
  [--receipt-id-format decimal|hex] [--id-width N] [--first-id N] [--gsm7 unpacked|packed] [--retain 100000]`;

/** Outcome flags by the receipt state they set the share of. */
const OUTCOME_FLAGS: Record<FinalState, string> = {
  DELIVRD: 'delivered', UNDELIV: 'undelivered', REJECTD: 'rejected', EXPIRED: 'expired', DELETED: 'deleted', UNKNOWN: 'unknown',
};

const stringOption = { type: 'string' } as const;
const flag = { type: 'boolean' } as const;

export async function simCommand(action: string | undefined, args: string[], usageError: (message: string) => Error): Promise<void> {
  if (action !== 'smsc') throw usageError(`unknown sim command ${action ?? '(none)'}`);
  const { values } = parseArgs({
    args,
    options: {
      port: stringOption, 'http-port': stringOption, host: stringOption, 'system-id': stringOption, password: stringOption,
      'tls-cert': stringOption, 'tls-key': stringOption,
      'receipt-delay-ms': stringOption, enroute: flag, 'receipt-before-response': flag, tps: stringOption, 'account-tps': stringOption,
      throttled: stringOption, 'queue-full': stringOption, 'reject-numbers': stringOption, 'reject-status': stringOption,
      'drop-after': stringOption, 'id-format': stringOption, 'receipt-id-format': stringOption, 'id-width': stringOption,
      'first-id': stringOption, gsm7: stringOption, retain: stringOption,
      ...Object.fromEntries(Object.values(OUTCOME_FLAGS).map((name) => [name, stringOption])),
    },
  });
  const text = (name: string) => (values as Record<string, string | boolean | undefined>)[name] as string | undefined;
  const number = (name: string): number | undefined => {
    const raw = text(name);
    if (raw === undefined) return undefined;
    const value = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(value)) throw usageError(`--${name} must be a number, not "${raw}"`);
    return value;
  };
  const oneOf = <T extends string>(name: string, choices: readonly T[]): T | undefined => {
    const raw = text(name);
    if (raw !== undefined && !choices.includes(raw as T)) throw usageError(`--${name} must be one of ${choices.join(', ')}`);
    return raw as T | undefined;
  };
  if ((text('system-id') === undefined) !== (text('password') === undefined)) throw usageError('--system-id and --password go together');
  if ((text('tls-cert') === undefined) !== (text('tls-key') === undefined)) throw usageError('--tls-cert and --tls-key go together');
  const pem = (name: string) => {
    try {
      return readFileSync(text(name)!);
    } catch (error) {
      throw usageError(`--${name}: cannot read ${text(name)} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  };
  const tls = text('tls-cert') === undefined ? undefined : { cert: pem('tls-cert'), key: pem('tls-key') };

  let rejectDestinations: RegExp | undefined;
  try {
    rejectDestinations = text('reject-numbers') === undefined ? undefined : new RegExp(text('reject-numbers')!);
  } catch {
    throw usageError(`--reject-numbers must be a regular expression, not "${text('reject-numbers')}"`);
  }
  const outcomes: Partial<Record<FinalState, number>> = {};
  for (const state of FINAL_STATES) {
    const value = number(OUTCOME_FLAGS[state]);
    if (value !== undefined) outcomes[state] = value;
  }
  const ID_FORMATS: readonly IdFormat[] = ['decimal', 'hex'];
  const options: SmscOptions = {
    port: number('port') ?? (tls ? 3550 : 2775),
    tls,
    httpPort: number('http-port') ?? 2776,
    host: text('host'),
    systemId: text('system-id'),
    password: text('password'),
    receiptDelayMs: number('receipt-delay-ms'),
    outcomes,
    enroute: values.enroute === true,
    receiptBeforeResponse: values['receipt-before-response'] === true,
    tps: number('tps'),
    accountTps: number('account-tps'),
    throttledShare: number('throttled'),
    queueFullShare: number('queue-full'),
    rejectDestinations,
    rejectStatus: number('reject-status'),
    dropAfterSubmits: number('drop-after'),
    idFormat: oneOf('id-format', ID_FORMATS),
    receiptIdFormat: oneOf('receipt-id-format', ID_FORMATS),
    idWidth: number('id-width'),
    firstId: number('first-id'),
    gsm7Packed: oneOf('gsm7', ['unpacked', 'packed'] as const) === 'packed',
    retain: number('retain'),
  };
  let smsc;
  try {
    smsc = await startSmsc(options);
  } catch (error) {
    if (error instanceof RangeError) throw usageError(error.message);
    throw error;
  }
  const host = options.host ?? '127.0.0.1';
  console.log(`SMSC simulator: SMPP${tls ? ' over TLS' : ''} on ${host}:${smsc.port}, control on http://${host}:${smsc.httpPort} (GET /messages, GET /arrivals, GET /stats, POST /mo, POST /reset)`);
  await Promise.race([once(process, 'SIGINT'), once(process, 'SIGTERM')]);
  await smsc.close();
}
