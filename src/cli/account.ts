import type { Config } from '../config.ts';
import { systemClock } from '../clock.ts';
import {
  accountView,
  createAccount,
  deleteAccount,
  listAccounts,
  rotatePrivateToken,
  setPassword,
  updateAccountSettings,
} from '../accounts/service.ts';
import { addSenderName } from '../senders/names.ts';
import { addSenderDomain } from '../senders/domains.ts';
import { RATE_LIMIT_GROUPS, type RateLimitGroup } from '../ratelimit/limits.ts';
import { addShortenerDomain } from '../links/shortener.ts';
import { readNewPassword } from './password-input.ts';
import { groupCommand, HELP, parse, print, required, usage, UsageError } from './commands.ts';
import { accountByUser, keyringFor, withDatabase, withExistingDatabase } from './database.ts';

export async function accountCommand(config: () => Config, action: string | undefined, args: string[]): Promise<void> {
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
    // The operator at the command line: the audit log's `admin`, from no address.
    const byAdmin = () => ({ actor: 'admin' as const, ip: null, at: clock.now() });
    switch (action) {
      case 'create': {
        const created = await createAccount(
          db,
          clock,
          {
            userName: option('user'),
            password: await newPassword(),
            timeZoneOffset: values['time-zone-offset'],
            locale: values.locale,
          },
          byAdmin(),
        );
        return print(accountView(created, created.privateToken));
      }
      case 'list':
        return print((await listAccounts(db)).map((row) => accountView(row)));
      case 'rotate-private-token': {
        const rotated = await rotatePrivateToken(db, clock, (await byUser()).id, byAdmin());
        return print(accountView(rotated, rotated.privateToken));
      }
      case 'set-password': {
        const { id } = await byUser();
        return print(accountView(await setPassword(db, clock, id, await newPassword(), byAdmin())));
      }
      case 'set-rate-limit': {
        const group = option('group') as RateLimitGroup;
        if (!RATE_LIMIT_GROUPS.includes(group))
          throw new UsageError(command, `--group must be one of ${RATE_LIMIT_GROUPS.join(', ')}`);
        const perMinute = Number(option('per-minute'));
        return print(
          accountView(
            await updateAccountSettings(
              db,
              clock,
              (await byUser()).id,
              { rateLimits: { [group]: perMinute } },
              byAdmin(),
            ),
          ),
        );
      }
      case 'add-sender-name':
        return print(
          await addSenderName(db, clock, {
            accountId: (await byUser()).id,
            name: option('name'),
            by: byAdmin(),
            defaultSenderName: config().defaultSenderName,
          }),
        );
      case 'add-sender-domain':
        return print(
          await addSenderDomain(database, await keyringFor(config(), database), clock, {
            accountId: (await byUser()).id,
            domain: option('domain'),
            serviceDomain: config().defaultEmailDomain,
            by: byAdmin(),
          }),
        );
      case 'add-shortener-domain': {
        const serviceHost = new URL(config().publicUrl).hostname;
        return print(
          await addShortenerDomain(db, clock, {
            accountId: (await byUser()).id,
            domain: option('domain'),
            serviceHost,
          }),
        );
      }
      case 'delete':
        await deleteAccount(db, (await byUser()).id);
        return print({ deleted: values.user });
    }
  });
}
