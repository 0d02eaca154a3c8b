import type { Config } from '../config.ts';
import { systemClock } from '../clock.ts';
import {
  dkimDomainView,
  listDkimKeys,
  removeDkimKey,
  rotateDkimKey,
  type DkimKeyHolder,
} from '../senders/dkim-keys.ts';
import { senderDomainHolder } from '../senders/domains.ts';
import { groupCommand, HELP, parse, print, required, usage, UsageError } from './commands.ts';
import { accountByUser, keyringFor, withDatabase, withExistingDatabase } from './database.ts';

/**
 * `herald dkim …`: the admin API's DKIM routes, for the service domain or, with --user and
 * --domain, an account's sender domain.
 */
export async function dkimCommand(config: () => Config, action: string | undefined, args: string[]): Promise<void> {
  const command = groupCommand('dkim', action);
  if (command === undefined) return;
  const values = parse(command, args, {
    ...HELP,
    user: { type: 'string' },
    domain: { type: 'string' },
    selector: { type: 'string' },
  });
  if (values.help) return console.log(usage(command));
  if ((values.user === undefined) !== (values.domain === undefined))
    throw new UsageError(command, "--user and --domain go together: an account's sender domain");
  const settings = config();
  const clock = systemClock;
  const opened = action === 'show' || action === 'keys' ? withExistingDatabase : withDatabase;
  await opened(settings, async (database) => {
    const holder: DkimKeyHolder =
      values.user === undefined
        ? { accountId: null, domain: settings.defaultEmailDomain }
        : await senderDomainHolder(database.db, (await accountByUser(database.db, values.user)).id, values.domain!);
    // The operator at the command line: the audit log's `admin`, from no address.
    const byAdmin = () => ({ actor: 'admin' as const, ip: null, at: clock.now() });
    switch (action) {
      case 'show':
        return print(await dkimDomainView(database, await keyringFor(settings, database), clock, holder));
      case 'rotate':
        return print(await rotateDkimKey(database, await keyringFor(settings, database), clock, holder, byAdmin()));
      case 'keys':
        return print({ domain: holder.domain, keys: await listDkimKeys(database.db, holder) });
      case 'remove-key': {
        const selector = required(command, values, 'selector');
        await removeDkimKey(database.db, holder, selector, byAdmin());
        return print({ removed: selector, domain: holder.domain });
      }
    }
  });
}
