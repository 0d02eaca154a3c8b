import { Type } from 'typebox';
import { PageCursor, PageLimit } from '../http/schemas.ts';

/** ARCHITECTURE.md, "setup objects": `POST /landing-pages {name, url}` → 201 `{landingPageId, name, url}`. */
export const LandingPageRequest = Type.Object({
  name: Type.String({
    maxLength: 200,
    description: 'A name of 1 to 100 characters, unique in the account (case-insensitively).',
  }),
  url: Type.String({ maxLength: 2048, description: 'Where the link leads: an absolute http:// or https:// URL.' }),
});

export const LandingPageBody = Type.Object({
  landingPageId: Type.String({ format: 'uuid' }),
  name: Type.String(),
  url: Type.String({
    description: 'As a browser writes it: host lower-cased, spaces and non-ASCII characters escaped.',
  }),
});

export const LandingPagePage = Type.Object({
  landingPages: Type.Array(LandingPageBody),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});

export const LandingPageQuery = Type.Object({
  limit: Type.Optional(PageLimit(1000, 100, 'Landing pages')),
  cursor: Type.Optional(PageCursor(100)),
});

/**
 * A short link's code in a path: checked by the handler, so that a code that is not one is a 404
 * like an unknown one.
 */
export const CodeParams = Type.Object({ code: Type.String() });

export const ShortenerDomainRequest = Type.Object({ domain: Type.String({ minLength: 1, maxLength: 253 }) });
export const ShortenerDomainBody = Type.Object({ domain: Type.String(), createdAt: Type.String() });
