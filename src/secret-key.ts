import { createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

/**
 * The one rule for ENCRYPTION_KEY's form, wherever it is read (the environment, the key file
 * beside a SQLite database): 32 bytes, written as 64 hex characters.
 */
export function keyFromHex(hex: string): KeyObject | undefined {
  return /^[0-9a-fA-F]{64}$/.test(hex) ? createSecretKey(Buffer.from(hex, 'hex')) : undefined;
}

export function generateKey(): KeyObject {
  return createSecretKey(randomBytes(32));
}
