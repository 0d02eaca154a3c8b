import type { KeyObject } from 'node:crypto';
import { loadSigningKey, resealJwtSecret, sealJwtSecret } from '../auth/signing-key.ts';
import type { Database } from '../db/database.ts';
import { erasedPending, eraseDeletedValues, pendingErasure } from '../db/erase.ts';
import { resealDkimKeys } from '../senders/dkim-keys.ts';
import { resealSmscUrls } from '../sms/routing/connections.ts';
import { prepareCodeKey, resealCodeKey } from '../verify/codes.ts';
import { prepareErasureKey, resealErasureKey } from '../messaging/erased-identifiers.ts';
import type { Keyring } from '../sealed.ts';
import { resealWebhookSecrets, sealWebhookSecrets } from '../webhooks/secrets.ts';
import { prepareUrlKey, resealUrlKey, sealClearUrls } from '../webhooks/url-passwords.ts';

/**
 * What every start (server.ts's createContext, and the tests' app) does with the secrets the
 * database keeps for good, before anything reads them, and its answer: the access tokens' key.
 *
 * Those the code before migration 0027 left in clear (the token key, the webhook secrets), and
 * before 0044 the credentials in webhook URLs, are sealed under ENCRYPTION_KEY, here because a
 * migration has no key; then the files of the database are rid of the clear values
 * (db/erase.ts), with those of any table a migration left to erase, only at the start that
 * sealed or found them, so that other starts stay fast. When ENCRYPTION_KEY replaced others
 * (ENCRYPTION_KEY_PREVIOUS), what they sealed of these, of the DKIM keys, the SMSC connections'
 * URLs and the keys of Verify's codes and webhook URLs' credentials is sealed anew
 * under it, so that dropping them later loses none; each value the current key sealed already
 * costs one AES-GCM open, no write.
 */
export async function prepareStoredSecrets(
  database: Database,
  keyring: Keyring,
  jwtSecret: string | undefined,
): Promise<KeyObject> {
  const { db } = database;
  const sealedJwtSecret = await sealJwtSecret(db, keyring);
  const sealedWebhookSecrets = await sealWebhookSecrets(db, keyring);
  // First what stops a start under the wrong ENCRYPTION_KEY, before any key is made anew.
  const jwtKey = await loadSigningKey(db, keyring, jwtSecret);
  await prepareUrlKey(db, keyring);
  const sealedUrls = await sealClearUrls(db, keyring, Date.now());
  const pending = await pendingErasure(db);
  if (sealedJwtSecret || sealedWebhookSecrets || sealedUrls.length > 0 || pending.length > 0) {
    const tables = new Set(['settings', 'webhook_secrets', ...sealedUrls, ...pending] as const);
    await eraseDeletedValues[database.dialect](db, [...tables]);
    await erasedPending(db);
  }
  if (keyring.all.length > 1) {
    await resealJwtSecret(db, keyring);
    await resealWebhookSecrets(db, keyring);
    await resealUrlKey(db, keyring);
    await resealDkimKeys(db, keyring);
    await resealSmscUrls(db, keyring);
    await resealCodeKey(db, keyring);
    await resealErasureKey(db, keyring);
  }
  await prepareErasureKey(db, keyring);
  await prepareCodeKey(db, keyring, Date.now());
  return jwtKey;
}
