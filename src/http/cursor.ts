import { decodeBase64url } from './base64url.ts';
import { badRequest } from '../errors.ts';

type Part = 'integer' | 'uuid' | 'digits' | 'address';
type Value<P extends Part> = P extends 'integer' ? number : string;

// An address holds dots, the parts' separator: it may only be a cursor's last part, which takes the rest.
// It is free text, so control characters are refused here as the boundary refuses them in a
// request's own fields (http/input.ts): PostgreSQL's text cannot hold a NUL.
const PART: Record<Part, RegExp> = {
  integer: /^[0-9]{1,16}$/,
  digits: /^[0-9]{1,18}$/,
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is its purpose
  address: /^[^@\s\u0000-\u001f\u007f]{1,64}@[^@\s\u0000-\u001f\u007f]{1,253}$/,
};

/**
 * A page cursor: the sort key of the last row shown, as base64url of its parts joined by
 * dots, so that a page is an index range scan however deep it is and stays stable while
 * rows arrive. Opaque to clients; one that does not decode is a 400 on `cursor`.
 */
export function cursorCodec<const P extends readonly Part[]>(parts: P) {
  type Key = { [I in keyof P]: Value<P[I]> };
  return {
    encode: (key: Key): string => Buffer.from((key as readonly unknown[]).join('.')).toString('base64url'),
    decode(cursor: string): Key {
      const split = (decodeBase64url(cursor)?.toString() ?? '').split('.');
      const values = [...split.slice(0, parts.length - 1), split.slice(parts.length - 1).join('.')];
      if (split.length < parts.length || !values.every((value, i) => PART[parts[i]].test(value))) {
        throw badRequest('The cursor is not one this API gave out.', [
          { field: 'cursor', message: 'must be a nextCursor from a previous page' },
        ]);
      }
      return values.map((value, i) => (parts[i] === 'integer' ? Number(value) : value)) as Key;
    },
    /**
     * A page from rows read with a limit one past the page's: the page's rows, and the cursor
     * of the next page when that extra row shows there is one.
     */
    page<R>(rows: R[], limit: number, keyOf: (last: R) => Key): { rows: R[]; nextCursor: string | null } {
      const shown = rows.slice(0, limit);
      return { rows: shown, nextCursor: rows.length > limit ? this.encode(keyOf(shown[shown.length - 1])) : null };
    },
  };
}
