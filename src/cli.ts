import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { AppError } from './errors.ts';
import { migrateToLatest, openDatabase } from './db/database.ts';
import { systemClock } from './clock.ts';
import { ROLES, serve, StartError, type Role } from './server.ts';
import {
  accountView,
  addSenderDomain,
  addSenderName,
  createAccount,
  deleteAccount,
  listAccounts,
  rotatePrivateToken,
  setPassword,
  updateAccountSettings,
  type AccountRow,
} from './accounts/service.ts';
import { findAccountByUserName } from './auth/credentials.ts';
import { RATE_LIMIT_GROUPS, type RateLimitGroup } from './ratelimit/limits.ts';
import { simCommand, SIM_USAGE } from './sim/cli.ts';

const USAGE = `usage: herald <command>

  serve [--role all|api|worker]           run the HTTP API and the queue's workers (migrates the database first);
                                          on PostgreSQL, --role splits them into separate processes
  migrate                                 bring the database schema up to date
  account create --user EMAIL --password PW [--time-zone-offset "UTC+05:30~India Standard Time"] [--locale en-IN]
  account list
  account rotate-private-token --user EMAIL
  account set-password --user EMAIL --password PW
  account set-rate-limit --user EMAIL --group sms|email|contacts|account --per-minute N
  account add-sender-name --user EMAIL --name NAME        (for the SMS module, not built yet)
  account add-sender-domain --user EMAIL --domain DOMAIN  (for the email module, not built yet)
  account delete --user EMAIL
${SIM_USAGE}

Configuration is read from the environment (see README.md).`;

class UsageError extends Error {}
/** A command that was well formed but cannot be done: one line, without the usage. */
class CommandError extends Error {}

function required(values: Record<string, string | boolean | undefined>, name: string): string {
  const value = values[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

async function accountCommand(config: Config, action: string | undefined, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      user: { type: 'string' },
      password: { type: 'string' },
      'time-zone-offset': { type: 'string' },
      locale: { type: 'string' },
      group: { type: 'string' },
      'per-minute': { type: 'string' },
      name: { type: 'string' },
      domain: { type: 'string' },
    },
  });
  const database = openDatabase(config.databaseUrl);
  const { db } = database;
  const clock = systemClock;
  try {
    await migrateToLatest(database);
    const byUser = async (): Promise<AccountRow> => {
      const account = await findAccountByUserName(db, required(values, 'user'));
      if (!account) throw new CommandError(`no account with the user name ${values.user}`);
      return account;
    };
    const print = (value: unknown) => console.log(JSON.stringify(value, null, 2));
    switch (action) {
      case 'create':
        return print(
          accountView(
            await createAccount(db, clock, {
              userName: required(values, 'user'),
              password: required(values, 'password'),
              timeZoneOffset: values['time-zone-offset'],
              locale: values.locale,
            }),
          ),
        );
      case 'list':
        return print((await listAccounts(db)).map(accountView));
      case 'rotate-private-token':
        return print(accountView(await rotatePrivateToken(db, clock, (await byUser()).id)));
      case 'set-password':
        return print(accountView(await setPassword(db, clock, (await byUser()).id, required(values, 'password'))));
      case 'set-rate-limit': {
        const group = required(values, 'group') as RateLimitGroup;
        if (!RATE_LIMIT_GROUPS.includes(group)) throw new UsageError(`--group must be one of ${RATE_LIMIT_GROUPS.join(', ')}`);
        const perMinute = Number(required(values, 'per-minute'));
        return print(accountView(await updateAccountSettings(db, clock, (await byUser()).id, { rateLimits: { [group]: perMinute } })));
      }
      case 'add-sender-name':
        return print(await addSenderName(db, clock, (await byUser()).id, required(values, 'name')));
      case 'add-sender-domain':
        return print(await addSenderDomain(db, clock, (await byUser()).id, required(values, 'domain')));
      case 'delete':
        await deleteAccount(db, (await byUser()).id);
        return print({ deleted: values.user });
      default:
        throw new UsageError(`unknown account command ${action ?? '(none)'}`);
    }
  } finally {
    await database.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const [command, action, ...rest] = argv;
  const config = loadConfig();
  switch (command) {
    case 'serve': {
      const { values } = parseArgs({ args: argv.slice(1), options: { role: { type: 'string', default: 'all' } } });
      if (!(ROLES as readonly string[]).includes(values.role)) throw new UsageError(`--role must be one of ${ROLES.join(', ')}`);
      await serve(config, values.role as Role);
      return;
    }
    case 'migrate': {
      const database = openDatabase(config.databaseUrl);
      try {
        const applied = await migrateToLatest(database);
        console.log(applied.length ? `applied: ${applied.join(', ')}` : 'the database is up to date');
      } finally {
        await database.close();
      }
      return;
    }
    case 'account':
      await accountCommand(config, action, rest);
      return;
    case 'sim':
      await simCommand(action, rest, (message) => new UsageError(message));
      return;
    case undefined:
    case 'help':
    case '--help':
      console.log(USAGE);
      return;
    default:
      throw new UsageError(`unknown command ${command}`);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof AppError || error instanceof StartError || error instanceof CommandError) {
    console.error(`herald: ${error.message}`);
  } else if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    console.error(`herald: ${(error as Error).message}\n\n${USAGE}`);
  } else {
    console.error(error);
  }
  process.exit(1);
});
