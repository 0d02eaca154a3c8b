import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { migrateToLatest, openDatabase, pendingMigrations, sqlitePath, type Database } from '../db/database.ts';
import { PROCEDURE_MODULES } from '../server/procedures.ts';
import { loadEncryptionKey } from '../messaging/encryption-key.ts';
import { dkimDomainView, listDkimKeys, removeDkimKey, rotateDkimKey, type DkimKeyHolder } from '../senders/dkim-keys.ts';
import { systemClock } from '../clock.ts';
import { ROLES, serve, StartError, type Role } from '../server/server.ts';
import {
  accountView,
  createAccount,
  deleteAccount,
  listAccounts,
  rotatePrivateToken,
  setPassword,
  updateAccountSettings,
  type AccountRow,
} from '../accounts/service.ts';
import { addSenderName } from '../senders/names.ts';
import { addSenderDomain, senderDomainHolder } from '../senders/domains.ts';
import { findAccountByUserName } from '../auth/credentials.ts';
import { rotateJwtSecret } from '../auth/signing-key.ts';
import { RATE_LIMIT_GROUPS, type RateLimitGroup } from '../ratelimit/limits.ts';
import { PasswordInputError, readNewPassword } from './password-input.ts';
import { simCommand, SIM_SMSC_ARGS, SIM_SMTP_ARGS } from '../sim/cli.ts';
import { addShortenerDomain } from '../links/shortener.ts';

/**
 * Every command's usage, the one source of `herald --help`, `herald account --help`,
 * `herald <command> --help` and of the usage printed after a usage error.
 */
const COMMANDS: Array<{ name: string; args: string; about: string }> = [
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
    args: '',
    about: `make a new key of access tokens, sealed in the database, for when a copy of the database
may have leaked (a backup from before the upgrade that sealed the key holds it in clear). Every
access token issued before stops working: clients ask POST /token again. A running serve keeps the
old key until it restarts: restart every serve process. Needs ENCRYPTION_KEY (on SQLite, the key
file beside the database will do); refused when JWT_SECRET is set, which is then the key.`,
  },
  {
    name: 'account create',
    args: '--user EMAIL [--password-stdin | --password PW] [--time-zone-offset "UTC+05:30~India Standard Time"] [--locale en-IN]',
    about: 'create an account and print it, with its privateToken',
  },
  { name: 'account list', args: '', about: 'print every account (of a database that exists and is migrated)' },
  { name: 'account rotate-private-token', args: '--user EMAIL', about: 'give the account a new privateToken; its access tokens stop working' },
  { name: 'account set-password', args: '--user EMAIL [--password-stdin | --password PW]', about: "change the account's password; its access tokens stop working" },
  {
    name: 'account set-rate-limit',
    args: '--user EMAIL --group sms|email|contacts|account --per-minute N',
    about: 'set how many requests a minute the account may make to one group of endpoints',
  },
  { name: 'account add-sender-name', args: '--user EMAIL --name NAME', about: 'allow an SMS sender name (senderName of /sms/single and /sms/batch)' },
  {
    name: 'account add-sender-domain',
    args: '--user EMAIL --domain DOMAIN',
    about: 'authorise an email sender domain for the account; prints its DKIM record (recordName, recordValue) to publish as a DNS TXT record',
  },
  {
    name: 'account add-shortener-domain',
    args: '--user EMAIL --domain DOMAIN',
    about: "register a custom short-link host (shortner.shortnerUrl https://DOMAIN); it answers /<code> for the account's links",
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
  { name: 'dkim rotate', args: '[--user EMAIL --domain DOMAIN]', about: 'make a new DKIM key under a new selector, which signs from now on; prints its record. The old key stays, retired' },
  {
    name: 'dkim keys',
    args: '[--user EMAIL --domain DOMAIN]',
    about: "print the domain's DKIM keys, the active one first, then the retired ones (of a migrated database)",
  },
  { name: 'dkim remove-key', args: '--selector SELECTOR [--user EMAIL --domain DOMAIN]', about: 'remove a retired DKIM key, once its record is withdrawn from DNS' },
  { name: 'sim smsc', args: SIM_SMSC_ARGS, about: 'an SMPP 3.4 SMSC simulator for development and tests (README, "SMSC simulator")' },
  {
    name: 'sim smtp',
    args: SIM_SMTP_ARGS,
    about: `an SMTP sink for development and tests (README, "SMTP sink"). MATCH is a recipient address or
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
function usage(name = ''): string {
  const synopsis = (c: (typeof COMMANDS)[number]) => [c.name, c.args].filter(Boolean).join(' ');
  const own = COMMANDS.find((c) => c.name === name);
  const commands = own ? [own] : COMMANDS.filter((c) => c.name.startsWith(name && `${name} `));
  const parts = own
    ? [`usage: herald ${synopsis(own)}`, own.about]
    : [`usage: herald ${name || '<command>'} …`, commands.map((c) => `  ${synopsis(c)}\n${c.about.replace(/^/gm, '      ')}`).join('\n')];
  if (commands.some((c) => c.args.includes('--password-stdin'))) parts.push(PASSWORD_NOTE);
  if (name === '') parts.push('Every command takes --help.');
  parts.push('Configuration is read from the environment (see README.md).');
  return parts.join('\n\n');
}

/** A command line that does not fit `command`'s usage: printed with that usage. */
class UsageError extends Error {
  readonly command: string;
  constructor(command: string, message: string) {
    super(message);
    this.command = command;
  }
}
/** A command that was well formed but cannot be done: one line, without the usage. */
class CommandError extends Error {}

const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/** parseArgs for one command, its errors as that command's UsageError. */
function parse<T extends ParseArgsOptionsConfig>(command: string, args: string[], options: T) {
  try {
    return parseArgs({ args, options, strict: true }).values;
  } catch (error) {
    if (!(error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) throw error;
    throw new UsageError(command, (error as Error).message);
  }
}

function required(command: string, values: Record<string, string | boolean | undefined>, name: string): string {
  const value = values[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(command, `--${name} is required`);
  return value;
}

const actionsOf = (group: string) => COMMANDS.filter((c) => c.name.startsWith(`${group} `)).map((c) => c.name.slice(group.length + 1));

/** The group's command named by `action`: undefined after printing the group's usage for --help. */
function groupCommand(group: 'account' | 'dkim', action: string | undefined): string | undefined {
  if (action === '--help' || action === '-h') {
    console.log(usage(group));
    return undefined;
  }
  if (action === undefined || !actionsOf(group).includes(action)) throw new UsageError(group, `unknown ${group} command ${action ?? '(none)'}`);
  return `${group} ${action}`;
}

/** The database migrated, with the procedures (db/procedure.ts) the commands call, for `work`; closed after. */
async function withDatabase<T>(config: Config, work: (database: Database) => Promise<T>): Promise<T> {
  const database = openDatabase(config.databaseUrl, { procedures: PROCEDURE_MODULES });
  try {
    await database.ready();
    await migrateToLatest(database);
    return await work(database);
  } finally {
    await database.close();
  }
}

// PostgreSQL's "invalid_catalog_name": the database named in DATABASE_URL does not exist.
const NO_SUCH_DATABASE = '3D000';

/**
 * The database as it is, for the commands that read: one that does not exist is not created
 * (node:sqlite would make an empty file, and a read of it answers nothing anyone uses) and one
 * behind the code is not migrated (a read is no time to change a schema): either is a
 * CommandError saying what to run.
 */
async function withExistingDatabase<T>(config: Config, work: (database: Database) => Promise<T>): Promise<T> {
  const file = sqlitePath(config.databaseUrl);
  const where = file === undefined ? 'of DATABASE_URL' : file === ':memory:' ? file : resolve(file);
  if (file !== undefined && (file === ':memory:' || !existsSync(file))) {
    throw new CommandError(`the database ${where} does not exist: herald migrate (or herald serve) makes it`);
  }
  const database = openDatabase(config.databaseUrl, { procedures: PROCEDURE_MODULES });
  try {
    await database.ready();
    const pending = await pendingMigrations(database);
    if (pending.length > 0) {
      const behind = `${pending.length} migrations to run, from ${pending[0]}`;
      throw new CommandError(`the database ${where} is not migrated (${behind}): run herald migrate first`);
    }
    return await work(database);
  } catch (error) {
    if ((error as { code?: string }).code === NO_SUCH_DATABASE) {
      const reason = (error as Error).message;
      throw new CommandError(`the database ${where} does not exist (${reason}): create it, then run herald migrate`);
    }
    throw error;
  } finally {
    await database.close();
  }
}

const print = (value: unknown) => console.log(JSON.stringify(value, null, 2));

async function accountByUser(db: Database['db'], userName: string): Promise<AccountRow> {
  const account = await findAccountByUserName(db, userName);
  if (!account) throw new CommandError(`no account with the user name ${userName}`);
  return account;
}

/** ENCRYPTION_KEY, read only by the commands that seal or open secrets: the others run on PostgreSQL without it. */
const keyringOf = (config: Config) => loadEncryptionKey(config.databaseUrl, config.encryptionKey, config.previousEncryptionKeys);

async function accountCommand(config: () => Config, action: string | undefined, args: string[]): Promise<void> {
  const command = groupCommand('account', action);
  if (command === undefined) return;
  const values = parse(command, args, {
    ...HELP,
    user: { type: 'string' },
    password: { type: 'string' },
    'password-stdin': { type: 'boolean' },
    'time-zone-offset': { type: 'string' },
    locale: { type: 'string' },
    group: { type: 'string' },
    'per-minute': { type: 'string' },
    name: { type: 'string' },
    domain: { type: 'string' },
  });
  if (values.help) return console.log(usage(command));
  const option = (name: string) => required(command, values, name);
  const newPassword = () => readNewPassword({ password: values.password, passwordStdin: values['password-stdin'] });
  const clock = systemClock;
  const opened = action === 'list' ? withExistingDatabase : withDatabase;
  await opened(config(), async (database) => {
    const { db } = database;
    const byUser = () => accountByUser(db, option('user'));
    switch (action) {
      case 'create': {
        const created = await createAccount(db, clock, {
          userName: option('user'),
          password: await newPassword(),
          timeZoneOffset: values['time-zone-offset'],
          locale: values.locale,
        });
        return print(accountView(created, created.privateToken));
      }
      case 'list':
        return print((await listAccounts(db)).map((row) => accountView(row)));
      case 'rotate-private-token': {
        const rotated = await rotatePrivateToken(db, clock, (await byUser()).id);
        return print(accountView(rotated, rotated.privateToken));
      }
      case 'set-password': {
        const { id } = await byUser();
        return print(accountView(await setPassword(db, clock, id, await newPassword())));
      }
      case 'set-rate-limit': {
        const group = option('group') as RateLimitGroup;
        if (!RATE_LIMIT_GROUPS.includes(group)) throw new UsageError(command, `--group must be one of ${RATE_LIMIT_GROUPS.join(', ')}`);
        const perMinute = Number(option('per-minute'));
        return print(accountView(await updateAccountSettings(db, clock, (await byUser()).id, { rateLimits: { [group]: perMinute } })));
      }
      case 'add-sender-name':
        return print(await addSenderName(db, clock, (await byUser()).id, option('name')));
      case 'add-sender-domain':
        return print(await addSenderDomain(database, keyringOf(config()), clock, { accountId: (await byUser()).id, domain: option('domain'), serviceDomain: config().defaultEmailDomain }));
      case 'add-shortener-domain': {
        const serviceHost = new URL(config().publicUrl).hostname;
        return print(await addShortenerDomain(db, clock, { accountId: (await byUser()).id, domain: option('domain'), serviceHost }));
      }
      case 'delete':
        await deleteAccount(db, (await byUser()).id);
        return print({ deleted: values.user });
    }
  });
}

/** `herald dkim …`: the admin API's DKIM routes, for the service domain or, with --user and --domain, an account's sender domain. */
async function dkimCommand(config: () => Config, action: string | undefined, args: string[]): Promise<void> {
  const command = groupCommand('dkim', action);
  if (command === undefined) return;
  const values = parse(command, args, { ...HELP, user: { type: 'string' }, domain: { type: 'string' }, selector: { type: 'string' } });
  if (values.help) return console.log(usage(command));
  if ((values.user === undefined) !== (values.domain === undefined)) throw new UsageError(command, '--user and --domain go together: an account\'s sender domain');
  const settings = config();
  const clock = systemClock;
  const opened = action === 'show' || action === 'keys' ? withExistingDatabase : withDatabase;
  await opened(settings, async (database) => {
    const holder: DkimKeyHolder =
      values.user === undefined
        ? { accountId: null, domain: settings.defaultEmailDomain }
        : await senderDomainHolder(database.db, (await accountByUser(database.db, values.user)).id, values.domain!);
    switch (action) {
      case 'show':
        return print(await dkimDomainView(database, keyringOf(settings), clock, holder));
      case 'rotate':
        return print(await rotateDkimKey(database, keyringOf(settings), clock, holder));
      case 'keys':
        return print({ domain: holder.domain, keys: await listDkimKeys(database.db, holder) });
      case 'remove-key': {
        const selector = required(command, values, 'selector');
        await removeDkimKey(database.db, holder, selector);
        return print({ removed: selector, domain: holder.domain });
      }
    }
  });
}

async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  // Read on use, so that --help works whatever the environment holds.
  const config = () => loadConfig();
  switch (command) {
    case 'serve': {
      const values = parse(command, args, { ...HELP, role: { type: 'string', default: 'all' } });
      if (values.help) return console.log(usage(command));
      if (!(ROLES as readonly string[]).includes(values.role)) throw new UsageError(command, `--role must be one of ${ROLES.join(', ')}`);
      await serve(config(), values.role as Role);
      return;
    }
    case 'migrate': {
      if (parse(command, args, HELP).help) return console.log(usage(command));
      const database = openDatabase(config().databaseUrl);
      try {
        const applied = await migrateToLatest(database);
        console.log(applied.length ? `applied: ${applied.join(', ')}` : 'the database is up to date');
      } finally {
        await database.close();
      }
      return;
    }
    case 'rotate-jwt-secret': {
      if (parse(command, args, HELP).help) return console.log(usage(command));
      const settings = config();
      if (settings.jwtSecret !== undefined) {
        throw new CommandError(
          'JWT_SECRET is set, and it is the key of access tokens, not the one in the database: ' +
            'change JWT_SECRET on every process and restart them to end every token',
        );
      }
      const keyring = keyringOf(settings);
      await withDatabase(settings, (database) => rotateJwtSecret(database.db, keyring));
      console.log(
        'A new key of access tokens is sealed in the database. Every access token issued before no longer works: ' +
          'clients ask POST /token again.\nRestart every herald serve process: each loads the key at its start, ' +
          'and until then goes on signing and accepting tokens with the old one.',
      );
      return;
    }
    case 'account':
      await accountCommand(config, args[0], args.slice(1));
      return;
    case 'dkim':
      await dkimCommand(config, args[0], args.slice(1));
      return;
    case 'sim': {
      const known = COMMANDS.some((c) => c.name === `sim ${args[0]}`);
      const command = known ? `sim ${args[0]}` : 'sim';
      if (args[0] === undefined || args.includes('--help') || args.includes('-h')) return console.log(usage(command));
      await simCommand(args[0], args.slice(1), (message) => new UsageError(command, message));
      return;
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      console.log(usage());
      return;
    default:
      throw new UsageError('', `unknown command ${command}`);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof AppError || error instanceof StartError || error instanceof CommandError || error instanceof PasswordInputError) {
    console.error(`herald: ${error.message}`);
  } else if (error instanceof UsageError) {
    console.error(`herald: ${error.message}\n\n${usage(error.command)}`);
  } else {
    console.error(error);
  }
  process.exit(1);
});
