import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { errorResponses } from '../http/schemas.ts';
import { signIn } from './credentials.ts';
import { SignInFields } from './schemas.ts';
import { LoginThrottle } from './throttle.ts';
import { VALIDITIES, expiryFor, signAccessToken } from './tokens.ts';

const TokenRequest = Type.Object({ ...SignInFields, validity: Type.Enum([...VALIDITIES]) });

// SPEC §5.3, field for field.
const TokenResponse = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer({ description: 'Lifetime in seconds.' }),
  userName: Type.String(),
  '.issued': Type.String({ format: 'date-time' }),
  '.expires': Type.String({ format: 'date-time' }),
  timeZoneOffset: Type.String(),
  locale: Type.String(),
});

export function authRoutes(app: FastifyInstance, ctx: AppContext): void {
  const throttle = new LoginThrottle(ctx.counters, ctx.clock);
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/token',
    {
      schema: {
        tags: ['authentication'],
        summary: 'Issue an access token (SPEC §5)',
        body: TokenRequest,
        response: { 200: TokenResponse, ...errorResponses(400, 401, 413, 415, 429) },
      },
    },
    async (request) => {
      const account = await signIn(ctx.db, throttle, request.body, request);
      const { validity } = request.body;
      // Whole seconds, as in the JWT's iat and exp, so .issued and .expires match the token exactly.
      const issuedAt = Math.floor(ctx.clock.now() / 1000) * 1000;
      const expiresAt = expiryFor(validity, issuedAt);
      const accessToken = await signAccessToken(
        ctx.jwtKey,
        { accountId: account.id, tokenVersion: account.token_version },
        issuedAt,
        expiresAt,
      );
      return {
        access_token: accessToken,
        token_type: 'Bearer' as const,
        expires_in: Math.round((expiresAt - issuedAt) / 1000),
        userName: account.user_name,
        '.issued': new Date(issuedAt).toISOString(),
        '.expires': new Date(expiresAt).toISOString(),
        timeZoneOffset: account.time_zone_offset,
        locale: account.locale,
      };
    },
  );
}
