import { Type } from 'typebox';
import type { AppContext } from '../context.ts';
import { AppError, badRequest } from '../errors.ts';
import type { Log } from '../log.ts';
import { verifyPassword } from './passwords.ts';
import { LoginThrottle } from './throttle.ts';

/** What the check needs of a request: whether it came under the console's cookie, and whose. */
interface AskedRequest {
  consoleSession: string | null;
  account: { id: string; userName: string };
  ip: string;
  log: Pick<Log, 'warn'>;
}

/**
 * Under the console's cookie, what outlives the session asks for the account's password again:
 * an API key, or a URL that will be sent the account's messages (a webhook endpoint, the inbound
 * SMS URL). A session left open on a shared machine must not become either. Wrong guesses count
 * against the sign-in throttle, as they would at the sign-in. A token or an API key is not asked:
 * its holder already holds the account.
 */
export function passwordAgain(ctx: Pick<AppContext, 'db' | 'counters' | 'clock'>) {
  const throttle = new LoginThrottle(ctx.counters, ctx.clock);
  return async (request: AskedRequest, password: string | undefined, what: string): Promise<void> => {
    if (request.consoleSession === null) return;
    if (password === undefined) {
      throw badRequest(`The console must send the account password again to ${what}.`, [
        { field: 'password', message: 'is required under a console session' },
      ]);
    }
    const attempt = await throttle.attempt(request.account.userName, request.ip, request.log);
    const row = await ctx.db
      .selectFrom('accounts')
      .select('password_hash')
      .where('id', '=', request.account.id)
      .executeTakeFirstOrThrow();
    if (!(await verifyPassword(password, row.password_hash))) {
      throw new AppError(403, 'The password is incorrect.', {
        errors: [{ field: 'password', message: 'is incorrect' }],
      });
    }
    await attempt.succeeded();
  };
}

/** The body field of the routes that ask. */
export const PasswordAgain = Type.Optional(
  Type.String({
    minLength: 1,
    maxLength: 1024,
    description: "The account's password: required under the console's session, ignored otherwise.",
  }),
);
