import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const argon2Async = promisify(argon2);

/** OWASP's argon2id baseline: 19 MiB, 2 passes, 1 lane (about 30 ms here). */
const PARAMETERS = { memory: 19_456, passes: 2, parallelism: 1, tagLength: 32 };

async function derive(password: string, salt: Buffer, p: typeof PARAMETERS): Promise<Buffer> {
  return argon2Async('argon2id', { message: password, nonce: salt, ...p });
}

/** A PHC string (`$argon2id$v=19$m=…,t=…,p=…$salt$hash`), so the cost can rise without breaking old hashes. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(password, salt, PARAMETERS);
  const { memory: m, passes: t, parallelism: p } = PARAMETERS;
  return `$argon2id$v=19$m=${m},t=${t},p=${p}$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const match = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([\w-]+)\$([\w-]+)$/.exec(encoded);
  if (!match) return false;
  const expected = Buffer.from(match[5], 'base64url');
  const actual = await derive(password, Buffer.from(match[4], 'base64url'), {
    memory: Number(match[1]),
    passes: Number(match[2]),
    parallelism: Number(match[3]),
    tagLength: expected.length,
  });
  return timingSafeEqual(actual, expected);
}

/**
 * Verified in place of a real hash when the user name is unknown, so that a wrong
 * user name takes as long as a wrong password and reveals nothing (no enumeration).
 */
export const DECOY_HASH = await hashPassword(randomBytes(16).toString('hex'));
