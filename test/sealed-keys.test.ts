import assert from 'node:assert/strict';
import { it } from 'node:test';
import { generateKey, Keyring } from '../src/sealed.ts';
import { loadSealedKey, prepareSealedKey, sealedNewKey, type SealedKey } from '../src/sealed-keys.ts';
import { createTestDatabase, forEachDatabase } from './support/databases.ts';

const KEY: SealedKey = { row: 'test_sealed_key', purpose: 'herald test sealed key' };

forEachDatabase((dialect) => {
  it('makes one new key for processes starting together after the old one was lost', async () => {
    const database = await createTestDatabase(dialect);
    try {
      const { db } = database;
      await db
        .insertInto('settings')
        .values({ key: KEY.row, value: sealedNewKey(new Keyring(generateKey()), KEY) })
        .execute();
      const current = generateKey();
      // Two processes, each with a keyring of its own under the same ENCRYPTION_KEY: both fail to
      // open the lost key's row before either replaces it; the second goes on once the first is done.
      const signal = () => {
        let resolve!: () => void;
        return { done: new Promise<void>((r) => (resolve = r)), resolve };
      };
      const firstFailed = signal();
      const secondFailed = signal();
      const firstDone = signal();
      const start = async (keyring: Keyring, dependedOn: () => Promise<boolean>) => {
        await prepareSealedKey(db, keyring, KEY, () => opened(keyring), dependedOn);
        return (await loadSealedKey(db, keyring, KEY))!.export().toString('hex');
      };
      const opened = async (keyring: Keyring) => {
        const key = await loadSealedKey(db, keyring, KEY);
        if (!key) throw new Error('ENCRYPTION_KEY: sealed under another key');
        return key;
      };
      const first = start(new Keyring(current), async () => {
        firstFailed.resolve();
        await secondFailed.done;
        return false;
      }).finally(firstDone.resolve);
      const second = start(new Keyring(current), async () => {
        secondFailed.resolve();
        await firstFailed.done;
        await firstDone.done;
        return false;
      });
      const [a, b] = await Promise.all([first, second]);
      assert.equal(a, b, 'one key for both');
    } finally {
      await database.close();
    }
  });
});
