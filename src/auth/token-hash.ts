import { hash } from 'node:crypto';

/**
 * What a bearer (a token, or an API key) is known by where it is kept: its SHA-256 (the access
 * cache's key, an API key's row). crypto.hash, one call: a Hash object per request cost three times as much.
 * A module of its own so that api-keys.ts, which runs on the SQLite thread, does not load jose.
 */
export const tokenHash = (token: string): string => hash('sha256', token, 'base64url');
