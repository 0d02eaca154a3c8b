import { ConfigError, loadConfig } from '../config.ts';
import { AppError } from '../errors.ts';
import { MigrationError, migrateToLatest, openDatabase } from '../db/database.ts';
import { rotateJwtSecret } from '../auth/signing-key.ts';
import type { Role } from '../server/server.ts';
import { simCommand } from '../sim/cli.ts';
import { PasswordInputError } from './password-input.ts';
import { COMMANDS, CommandError, HELP, parse, usage, UsageError } from './commands.ts';
import { keyringFor, keyringOf, withDatabase } from './database.ts';

/** The `herald` program (bin/herald): each command's usage is in commands.ts, the one source of every --help. */
async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  // Read on use, so that --help works whatever the environment holds.
  const config = () => loadConfig();
  switch (command) {
    case 'serve': {
      const values = parse(command, args, { ...HELP, role: { type: 'string', default: 'all' } });
      if (values.help) return console.log(usage(command));
      // The server, with everything it serves, loads here only: every other command starts without it.
      const { ROLES, serve, StartError } = await import('../server/server.ts');
      if (!(ROLES as readonly string[]).includes(values.role))
        throw new UsageError(command, `--role must be one of ${ROLES.join(', ')}`);
      try {
        await serve(config(), values.role as Role);
      } catch (error) {
        throw error instanceof StartError ? new CommandError(error.message) : error;
      }
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
      const values = parse(command, args, { ...HELP, 'key-lost': { type: 'boolean', default: false } });
      if (values.help) return console.log(usage(command));
      const settings = config();
      if (settings.jwtSecret !== undefined) {
        throw new CommandError(
          'JWT_SECRET is set, and it is the key of access tokens, not the one in the database: ' +
            'change JWT_SECRET on every process and restart them to end every token',
        );
      }
      await withDatabase(settings, async (database) => {
        // A key other than serve's would seal a key of access tokens serve cannot open.
        const keyring = values['key-lost'] ? keyringOf(settings) : await keyringFor(settings, database);
        await rotateJwtSecret(database.db, keyring);
      });
      console.log(
        'A new key of access tokens is sealed in the database. Every access token issued before no longer works: ' +
          'clients ask POST /token again.\nRestart every herald serve process: each loads the key at its start, ' +
          'and until then goes on signing and accepting tokens with the old one.',
      );
      return;
    }
    // Each command's module loads when it runs, as the server does: `herald account list` need not
    // load what `herald routes set` validates its table with.
    case 'account':
      await (await import('./account.ts')).accountCommand(config, args[0], args.slice(1));
      return;
    case 'dkim':
      await (await import('./dkim.ts')).dkimCommand(config, args[0], args.slice(1));
      return;
    case 'smsc':
      await (await import('./smsc.ts')).smscCommand(config, args[0], args.slice(1));
      return;
    case 'routes':
      await (await import('./smsc.ts')).routesCommand(config, args[0], args.slice(1));
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
  if (
    error instanceof ConfigError ||
    error instanceof AppError ||
    error instanceof CommandError ||
    error instanceof PasswordInputError ||
    error instanceof MigrationError
  ) {
    console.error(`herald: ${error.message}`);
    if (error instanceof AppError)
      for (const fault of error.errors) console.error(`  ${fault.field}: ${fault.message}`);
  } else if (error instanceof UsageError) {
    console.error(`herald: ${error.message}\n\n${usage(error.command)}`);
  } else {
    console.error(error);
  }
  process.exit(1);
});
