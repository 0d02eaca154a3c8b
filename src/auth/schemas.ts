import { Type } from 'typebox';
import { Uuid } from '../http/schemas.ts';

/**
 * The three credentials of a sign-in, as a request body's fields: POST /token's and the
 * console's. Not in credentials.ts: that module runs on SQLite's database thread too
 * (accounts/service.ts imports it), which has no use for schemas.
 */
export const SignInFields = {
  userName: Type.String({ minLength: 1, maxLength: 254 }),
  password: Type.String({ minLength: 1, maxLength: 1024 }),
  privateToken: Uuid(),
};
