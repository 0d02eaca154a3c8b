import { readFileSync } from 'node:fs';

/**
 * The PEM text of a transport URL's `ca=` (the certificates a next hop with a private CA must
 * chain to), read once at start, so a wrong path stops the start rather than every connection.
 * Throws an Error naming the fault (config.ts names the variable).
 */
export function readCaFile(path: string): string {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`ca: cannot read "${path}" (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new Error(`ca: "${path}" holds no PEM certificate`);
  return pem;
}
