import { randomUUID, type KeyObject } from 'node:crypto';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';
import { decodeBase64url } from '../http/base64url.ts';
import { invalidToken } from '../errors.ts';

export const VALIDITIES = ['Default', 'ShortLive', 'LongLive'] as const;
export type Validity = (typeof VALIDITIES)[number];

const ISSUER = 'herald';

/** SPEC §5.2: Default = 12000 minutes, ShortLive = 30 seconds, LongLive = 120 calendar months. */
export function expiryFor(validity: Validity, issuedAt: number): number {
  switch (validity) {
    case 'Default':
      return issuedAt + 12_000 * 60_000;
    case 'ShortLive':
      return issuedAt + 30_000;
    case 'LongLive': {
      const expires = new Date(issuedAt);
      expires.setUTCMonth(expires.getUTCMonth() + 120);
      return expires.getTime();
    }
  }
}

export interface TokenSubject {
  accountId: string;
  /** The account's token_version when issued; a later password change or private-token rotation bumps it. */
  tokenVersion: number;
  /** Epoch ms, the token's `exp`. */
  expiresAt: number;
}

export async function signAccessToken(
  key: KeyObject,
  subject: Omit<TokenSubject, 'expiresAt'>,
  issuedAt: number,
  expiresAt: number,
): Promise<string> {
  return new SignJWT({ ver: subject.tokenVersion })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(subject.accountId)
    .setIssuer(ISSUER)
    .setJti(randomUUID())
    .setIssuedAt(Math.floor(issuedAt / 1000))
    .setExpirationTime(Math.floor(expiresAt / 1000))
    .sign(key);
}

/**
 * Verifies signature, algorithm (HS256 only: `none` and every other algorithm are refused) and
 * expiry. Each part must be canonical base64url: jose decodes the signature leniently (padding,
 * spare bits), which would let one token be written several ways.
 */
export async function verifyAccessToken(key: KeyObject, token: string, now: number): Promise<TokenSubject> {
  const parts = token.split('.');
  if (parts.length !== 3 || parts.some((part) => decodeBase64url(part) === null)) throw invalidToken('it is malformed');
  try {
    const { payload } = await jwtVerify(token, key, {
      algorithms: ['HS256'],
      issuer: ISSUER,
      requiredClaims: ['sub', 'exp', 'ver'],
      currentDate: new Date(now),
      clockTolerance: 0,
    });
    if (typeof payload.sub !== 'string' || typeof payload.ver !== 'number') throw invalidToken('malformed claims');
    return { accountId: payload.sub, tokenVersion: payload.ver, expiresAt: payload.exp! * 1000 };
  } catch (error) {
    if (error instanceof joseErrors.JWTExpired) throw invalidToken('it has expired');
    if (error instanceof joseErrors.JOSEAlgNotAllowed || error instanceof joseErrors.JOSENotSupported) {
      throw invalidToken('its algorithm is not accepted');
    }
    if (error instanceof joseErrors.JWSSignatureVerificationFailed) throw invalidToken('its signature does not verify');
    if (error instanceof joseErrors.JOSEError) throw invalidToken('it is malformed');
    throw error;
  }
}
