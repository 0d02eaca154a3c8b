import { open, seal, type Keyring } from '../sealed.ts';

/**
 * A recipient's own tags (send_recipients.tags, JSON) sealed, for a send whose texts are
 * secrets (an encrypted SMS, a Verify code by email), each bound to its send and address; opened
 * by its worker just before it renders.
 */
const tagsPlace = (sendId: string, address: string) => `send_recipients.tags:${sendId}:${address}`;

export const sealedTags = (keys: Keyring, sendId: string, address: string, tags: string): string =>
  seal(keys.current, tags, tagsPlace(sendId, address));

export const openedTags = (tags: string, sendId: string, address: string, keys: Keyring): string =>
  open(keys, tags, tagsPlace(sendId, address));
