/**
 * `herald sim smsc|smtp [options]`: the command-line face of startSmsc and startSmtpSink, running
 * until SIGINT or SIGTERM.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
// The simulators themselves load with their command: `herald serve` imports this module for
// the usage table only, and would otherwise carry the SMPP, SMTP and MIME libraries they use.
import type { FinalState, IdFormat, SmscOptions } from './smsc.ts';
import type { SmtpRule, SmtpSinkOptions } from './smtp.ts';

export const SIM_SMSC_ARGS = `[--port 2775] [--http-port 2776] [--host 127.0.0.1] [--system-id ID --password PW]
  [--tls-cert cert.pem --tls-key key.pem (SMPP over TLS, port 3550 by default)]
  [--receipt-delay-ms 1000] [--delivered 0.95 --undelivered 0.03 --rejected --expired --deleted --unknown]
  [--enroute] [--receipt-before-response] [--tps N] [--account-tps N] [--throttled SHARE] [--queue-full SHARE]
  [--reject-numbers REGEX [--reject-status 0x0B]] [--drop-after N] [--id-format decimal|hex]
  [--receipt-id-format decimal|hex] [--id-width N] [--first-id N] [--gsm7 unpacked|packed] [--retain 100000]`;

/** Outcome flags by the receipt state they set the share of. */
const OUTCOME_FLAGS: Record<FinalState, string> = {
  DELIVRD: 'delivered',
  UNDELIV: 'undelivered',
  REJECTD: 'rejected',
  EXPIRED: 'expired',
  DELETED: 'deleted',
  UNKNOWN: 'unknown',
};

const stringOption = { type: 'string' } as const;
const flag = { type: 'boolean' } as const;

export const SIM_SMTP_ARGS = `[--port 2525] [--http-port 2526] [--host 127.0.0.1] [--user USER --password PW]
  [--tls-cert cert.pem --tls-key key.pem (STARTTLS)] [--accept MATCH]
  [--defer MATCH:TIMES[:CODE[:STATUS[:TEXT]]]] [--reject MATCH[:CODE[:STATUS[:TEXT]]]]
  [--defer-data MATCH:TIMES[:…]] [--reject-data MATCH[:…]]
  [--drop-after N [--drop-repeat]] [--delay-ms N] [--retain 100000 (0: count only)] [--max-size BYTES]
  [--report-to HOST:PORT (Herald's inbound SMTP port, where POST /reports sends DSNs and ARF reports)]`;

/** One simulator's options read from its command line, its mistakes as usage errors. */
function reader<T extends ParseArgsOptionsConfig>(args: string[], options: T, usageError: (message: string) => Error) {
  const parsed = (() => {
    try {
      return parseArgs({ args, options, tokens: true });
    } catch (error) {
      if (!(error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) throw error;
      throw usageError((error as Error).message);
    }
  })();
  const { values, tokens } = parsed;
  const text = (name: string) => (values as Record<string, string | boolean | undefined>)[name] as string | undefined;
  const number = (name: string): number | undefined => {
    const raw = text(name);
    if (raw === undefined) return undefined;
    const value = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(value)) throw usageError(`--${name} must be a number, not "${raw}"`);
    return value;
  };
  const together = (first: string, second: string) => {
    if ((text(first) === undefined) !== (text(second) === undefined))
      throw usageError(`--${first} and --${second} go together`);
  };
  const pem = (name: string) => {
    try {
      return readFileSync(text(name)!);
    } catch (error) {
      throw usageError(
        `--${name}: cannot read ${text(name)} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
      );
    }
  };
  together('tls-cert', 'tls-key');
  const tls = text('tls-cert') === undefined ? undefined : { cert: pem('tls-cert'), key: pem('tls-key') };
  return { values, tokens, text, number, together, tls };
}

/** Starts a simulator, its option errors (RangeError) as usage errors, and runs it until SIGINT or SIGTERM. */
async function runUntilSignal<T extends { close(): Promise<void> }>(
  start: () => Promise<T>,
  banner: (sim: T) => string,
  usageError: (message: string) => Error,
) {
  let sim: T;
  try {
    sim = await start();
  } catch (error) {
    if (error instanceof RangeError) throw usageError(error.message);
    throw error;
  }
  console.log(banner(sim));
  await Promise.race([once(process, 'SIGINT'), once(process, 'SIGTERM')]);
  await sim.close();
}

export async function simCommand(
  action: string | undefined,
  args: string[],
  usageError: (message: string) => Error,
): Promise<void> {
  if (action === 'smsc') return smscCommand(args, usageError);
  if (action === 'smtp') return smtpCommand(args, usageError);
  throw usageError(`unknown sim command ${action ?? '(none)'}`);
}

async function smscCommand(args: string[], usageError: (message: string) => Error): Promise<void> {
  const { FINAL_STATES, startSmsc } = await import('./smsc.ts');
  const { values, text, number, together, tls } = reader(
    args,
    {
      port: stringOption,
      'http-port': stringOption,
      host: stringOption,
      'system-id': stringOption,
      password: stringOption,
      'tls-cert': stringOption,
      'tls-key': stringOption,
      'receipt-delay-ms': stringOption,
      enroute: flag,
      'receipt-before-response': flag,
      tps: stringOption,
      'account-tps': stringOption,
      throttled: stringOption,
      'queue-full': stringOption,
      'reject-numbers': stringOption,
      'reject-status': stringOption,
      'drop-after': stringOption,
      'id-format': stringOption,
      'receipt-id-format': stringOption,
      'id-width': stringOption,
      'first-id': stringOption,
      gsm7: stringOption,
      retain: stringOption,
      ...Object.fromEntries(Object.values(OUTCOME_FLAGS).map((name) => [name, stringOption])),
    },
    usageError,
  );
  const oneOf = <T extends string>(name: string, choices: readonly T[]): T | undefined => {
    const raw = text(name);
    if (raw !== undefined && !choices.includes(raw as T))
      throw usageError(`--${name} must be one of ${choices.join(', ')}`);
    return raw as T | undefined;
  };
  together('system-id', 'password');
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
  const host = options.host ?? '127.0.0.1';
  await runUntilSignal(
    () => startSmsc(options),
    (smsc) =>
      `SMSC simulator: SMPP${tls ? ' over TLS' : ''} on ${host}:${smsc.port}, control on ` +
      `http://${host}:${smsc.httpPort} (GET /messages, GET /arrivals, GET /stats, POST /mo, POST /reset)`,
    usageError,
  );
}

const ENHANCED = String.raw`[245]\.\d{1,3}\.\d{1,3}`;
/** MATCH:TIMES[:CODE[:STATUS[:TEXT]]]; MATCH runs to the first `:TIMES` that lets the rest parse. */
const DEFER_SPEC = new RegExp(String.raw`^(.+?):(\d+)(?::(\d{3})(?::(${ENHANCED}))?(?::(.+))?)?$`, 's');
/** MATCH[:CODE[:STATUS[:TEXT]]]. */
const REJECT_SPEC = new RegExp(String.raw`^(.+?)(?::(\d{3})(?::(${ENHANCED}))?(?::(.+))?)?$`, 's');

/** The rule flags by their action and when they answer. */
const RULE_FLAGS: Record<string, Pick<SmtpRule, 'action' | 'at'>> = {
  accept: { action: 'accept' },
  defer: { action: 'defer' },
  reject: { action: 'reject' },
  'defer-data': { action: 'defer', at: 'data' },
  'reject-data': { action: 'reject', at: 'data' },
};

/** A rule flag's value as a rule. */
function ruleOf(flagName: string, spec: string, usageError: (message: string) => Error): SmtpRule {
  const { action, at } = RULE_FLAGS[flagName];
  if (action === 'accept') return { match: spec, action };
  const parsed = (action === 'defer' ? DEFER_SPEC : REJECT_SPEC).exec(spec);
  if (!parsed)
    throw usageError(
      `--${flagName} must be ${action === 'defer' ? 'MATCH:TIMES' : 'MATCH'}[:CODE[:STATUS[:TEXT]]], not "${spec}"`,
    );
  const [match, times, code, status, text] =
    action === 'defer' ? parsed.slice(1) : [parsed[1], undefined, ...parsed.slice(2)];
  return {
    match,
    action,
    ...(at === undefined ? {} : { at }),
    ...(times === undefined ? {} : { times: Number(times) }),
    ...(code === undefined ? {} : { code: Number(code) }),
    ...(status === undefined ? {} : { status }),
    ...(text === undefined ? {} : { text }),
  };
}

/** --report-to HOST:PORT (an IPv6 host in brackets) as the sink's report destination. */
function reportToOf(spec: string | undefined, usageError: (message: string) => Error): SmtpSinkOptions['reportTo'] {
  if (spec === undefined) return undefined;
  const parsed = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(spec);
  if (!parsed) throw usageError(`--report-to must be HOST:PORT, not "${spec}"`);
  return { host: parsed[1] ?? parsed[2], port: Number(parsed[3]) };
}

const SINK_ROUTES =
  'GET /messages, DELETE /messages, GET|PUT /rules, GET|PUT /faults, GET /stats, POST /reset, POST /reports';

async function smtpCommand(args: string[], usageError: (message: string) => Error): Promise<void> {
  const { startSmtpSink } = await import('./smtp.ts');
  const { values, tokens, text, number, together, tls } = reader(
    args,
    {
      port: stringOption,
      'http-port': stringOption,
      host: stringOption,
      user: stringOption,
      password: stringOption,
      'tls-cert': stringOption,
      'tls-key': stringOption,
      ...Object.fromEntries(Object.keys(RULE_FLAGS).map((name) => [name, { type: 'string', multiple: true } as const])),
      'drop-after': stringOption,
      'drop-repeat': flag,
      'delay-ms': stringOption,
      retain: stringOption,
      'max-size': stringOption,
      'report-to': stringOption,
    },
    usageError,
  );
  together('user', 'password');
  // In the order given, across the rule flags: the first rule that matches decides.
  const rules = tokens.flatMap((token) =>
    token.kind === 'option' && Object.hasOwn(RULE_FLAGS, token.name) && token.value !== undefined
      ? [ruleOf(token.name, token.value, usageError)]
      : [],
  );
  const options: SmtpSinkOptions = {
    port: number('port') ?? 2525,
    httpPort: number('http-port') ?? 2526,
    host: text('host'),
    user: text('user'),
    password: text('password'),
    tls,
    rules,
    dropAfter: number('drop-after'),
    dropRepeat: values['drop-repeat'] === true,
    delayMs: number('delay-ms'),
    retain: number('retain'),
    maxSize: number('max-size'),
    reportTo: reportToOf(text('report-to'), usageError),
  };
  const host = options.host ?? '127.0.0.1';
  await runUntilSignal(
    () => startSmtpSink(options),
    (sink) =>
      `SMTP sink: SMTP${tls ? ' with STARTTLS' : ''} on ${host}:${sink.port}, control on ` +
      `http://${host}:${sink.httpPort} (${SINK_ROUTES})`,
    usageError,
  );
}
