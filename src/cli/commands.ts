import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { RATE_LIMIT_GROUPS } from '../ratelimit/limits.ts';
import { SIM_SMSC_ARGS, SIM_SMTP_ARGS } from '../sim/cli.ts';

/**
 * Every command's usage, the one source of `herald --help`, `herald account --help`,
 * `herald <command> --help` and of the usage printed after a usage error.
 */
export const COMMANDS: Array<{ name: string; args: string; about: string }> = [
  {
    name: 'serve',
    args: '[--role all|api|worker]',
    about: `run the HTTP API and the queue's workers (migrates the database first). On SQLite one serve per
database, both together. On PostgreSQL, --role splits them into separate processes; a worker
process answers /healthz, /readyz and /metrics on WORKER_PORT. With INBOUND_SMTP_PORT set, the
API's process (all or api) also takes bounces, spam complaints and unsubscribe mail by SMTP.`,
  },
  { name: 'migrate', args: '', about: 'bring the database schema up to date' },
  {
    name: 'rotate-jwt-secret',
    args: '[--key-lost]',
    about: `make a new key of access tokens, sealed in the database, for when a copy of the database
may have leaked (a backup from before the upgrade that sealed the key holds it in clear). Every
access token issued before stops working: clients ask POST /token again. A running serve keeps the
old key until it restarts: restart every serve process. Needs the ENCRYPTION_KEY serve runs with
(on SQLite, the key file beside the database will do), and refuses another; refused when JWT_SECRET
is set, which is then the key. --key-lost: ENCRYPTION_KEY was lost, and serve stops at start as the
key of access tokens does not open; the new one is sealed under the ENCRYPTION_KEY given (on SQLite
with none given, a new key file), which every serve must then be given.`,
  },
  {
    name: 'account create',
    args:
      '--user EMAIL [--password-stdin | --password PW] [--time-zone-offset "UTC+05:30~India Standard Time"] ' +
      '[--locale en-IN]',
    about: 'create an account and print it, with its privateToken',
  },
  { name: 'account list', args: '', about: 'print every account (of a database that exists and is migrated)' },
  {
    name: 'account rotate-private-token',
    args: '--user EMAIL',
    about: 'give the account a new privateToken; its access tokens stop working',
  },
  {
    name: 'account set-password',
    args: '--user EMAIL [--password-stdin | --password PW]',
    about: "change the account's password; its access tokens stop working",
  },
  {
    name: 'account set-rate-limit',
    args: `--user EMAIL --group ${RATE_LIMIT_GROUPS.join('|')} --per-minute N`,
    about: 'set how many requests a minute the account may make to one group of endpoints',
  },
  {
    name: 'account add-sender-name',
    args: '--user EMAIL --name NAME',
    about: 'allow an SMS sender name (senderName of /sms/single and /sms/batch)',
  },
  {
    name: 'account add-sender-domain',
    args: '--user EMAIL --domain DOMAIN',
    about:
      'authorise an email sender domain for the account; prints its DKIM record (recordName, recordValue) to ' +
      'publish as a DNS TXT record',
  },
  {
    name: 'account add-shortener-domain',
    args: '--user EMAIL --domain DOMAIN',
    about:
      'register a custom short-link host (shortner.shortnerUrl https://DOMAIN); it answers /<code> for the ' +
      "account's links",
  },
  { name: 'account delete', args: '--user EMAIL', about: 'delete the account' },
  {
    name: 'dkim show',
    args: '[--user EMAIL --domain DOMAIN]',
    about: `print the DKIM record to publish: the service domain's (DEFAULT_EMAIL_DOMAIN), or with --user and
--domain that sender domain's. The service domain's first key is made here if it has none yet
(which needs ENCRYPTION_KEY on PostgreSQL). Like every command that reads, it neither makes nor
migrates the database: run herald migrate first.`,
  },
  {
    name: 'dkim rotate',
    args: '[--user EMAIL --domain DOMAIN]',
    about:
      'make a new DKIM key under a new selector, which signs from now on; prints its record. The old key ' +
      'stays, retired',
  },
  {
    name: 'dkim keys',
    args: '[--user EMAIL --domain DOMAIN]',
    about: "print the domain's DKIM keys, the active one first, then the retired ones (of a migrated database)",
  },
  {
    name: 'dkim remove-key',
    args: '--selector SELECTOR [--user EMAIL --domain DOMAIN]',
    about: 'remove a retired DKIM key, once its record is withdrawn from DNS',
  },
  {
    name: 'smsc add',
    args: '--name NAME (--url-stdin | --url URL)',
    about: `add an SMSC connection beside SMS_TRANSPORT's default: an smpp://, smpps:// or sandbox: URL as
SMS_TRANSPORT takes it (docs/sms.md, "Routes over several SMSCs"). Its password is sealed under
ENCRYPTION_KEY and shown as ***. --url-stdin reads the URL from standard input (one trailing newline
is not part of it), keeping its password out of the process list and shell history`,
  },
  { name: 'smsc list', args: '', about: 'print the SMSC connections, default first, with their state and binds up' },
  {
    name: 'smsc remove',
    args: '--name NAME',
    about: 'remove an SMSC connection; refused while a route names it or parts it took await their receipts',
  },
  {
    name: 'routes set',
    args: '--file FILE',
    about: `replace the SMS routing table with the one in FILE: the body of PUT /admin/sms-routes,
{"routes": [{"prefix": "44", "smsc": ["uk", "eu"], "pricePerPart": "0.0075", "currency": "GBP"}]},
or its list alone`,
  },
  { name: 'routes list', args: '', about: 'print the SMS routing table' },
  {
    name: 'sim smsc',
    args: SIM_SMSC_ARGS,
    about: 'an SMPP 3.4 SMSC simulator for development and tests (docs/operations.md, "SMSC simulator")',
  },
  {
    name: 'sim smtp',
    args: SIM_SMTP_ARGS,
    about: `an SMTP sink for development and tests (docs/operations.md, "SMTP sink"). MATCH is a recipient address or
/regex/flags; the first rule flag that matches a RCPT TO decides, in the order given, and an
address none matches is accepted. --defer answers 451 4.3.0 (or CODE STATUS TEXT) to its first
TIMES attempts for each address, then accepts; --reject answers 550 5.1.1 (or CODE STATUS TEXT)
every time. --defer-data and --reject-data accept the recipient and give their reply to the end
of the message's data instead. --drop-after N destroys the connection instead of answering the
message after N accepted ones (once, or every N with --drop-repeat). The control port's
POST /reports sends a DSN or an ARF report about a message it took back to Herald's inbound
port: to --report-to HOST:PORT unless the request names a host and port.`,
  },
];

const PASSWORD_NOTE = `The password: --password-stdin reads all of standard input (one trailing newline removed);
with no password option and a terminal, it is asked for twice, unseen; --password PW also
works, but lands in the shell's history and shows in the process list.`;

/** The usage of the command `name`, or of every command that begins with it (all of them for ''). */
export function usage(name = ''): string {
  const synopsis = (c: (typeof COMMANDS)[number]) => [c.name, c.args].filter(Boolean).join(' ');
  const own = COMMANDS.find((c) => c.name === name);
  const commands = own ? [own] : COMMANDS.filter((c) => c.name.startsWith(name && `${name} `));
  const parts = own
    ? [`usage: herald ${synopsis(own)}`, own.about]
    : [
        `usage: herald ${name || '<command>'} …`,
        commands.map((c) => `  ${synopsis(c)}\n${c.about.replace(/^/gm, '      ')}`).join('\n'),
      ];
  if (commands.some((c) => c.args.includes('--password-stdin'))) parts.push(PASSWORD_NOTE);
  if (name === '') parts.push('Every command takes --help.');
  parts.push('Configuration is read from the environment (see docs/operations.md, "Configuration").');
  return parts.join('\n\n');
}

/** A command line that does not fit `command`'s usage: printed with that usage. */
export class UsageError extends Error {
  readonly command: string;
  constructor(command: string, message: string) {
    super(message);
    this.command = command;
  }
}
/** A command that was well formed but cannot be done: one line, without the usage. */
export class CommandError extends Error {}

export const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/** parseArgs for one command, its errors as that command's UsageError. */
export function parse<T extends ParseArgsOptionsConfig>(command: string, args: string[], options: T) {
  try {
    return parseArgs({ args, options, strict: true }).values;
  } catch (error) {
    if (!(error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) throw error;
    throw new UsageError(command, (error as Error).message);
  }
}

export function required(command: string, values: Record<string, string | boolean | undefined>, name: string): string {
  const value = values[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(command, `--${name} is required`);
  return value;
}

const actionsOf = (group: string) =>
  COMMANDS.filter((c) => c.name.startsWith(`${group} `)).map((c) => c.name.slice(group.length + 1));

/** The group's command named by `action`: undefined after printing the group's usage for --help. */
export function groupCommand(
  group: 'account' | 'dkim' | 'smsc' | 'routes',
  action: string | undefined,
): string | undefined {
  if (action === '--help' || action === '-h') {
    console.log(usage(group));
    return undefined;
  }
  if (action === undefined || !actionsOf(group).includes(action))
    throw new UsageError(group, `unknown ${group} command ${action ?? '(none)'}`);
  return `${group} ${action}`;
}

export const print = (value: unknown) => console.log(JSON.stringify(value, null, 2));
