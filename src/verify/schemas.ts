import { Type } from 'typebox';

/** How a verification reads (record.ts's verificationView): GET /verify/{id}, and the person's export. */
export const Verification = Type.Object({
  verificationId: Type.String(),
  to: Type.String(),
  channel: Type.String(),
  status: Type.String(),
  expiresAt: Type.String({ format: 'date-time' }),
  sendAttempts: Type.Integer(),
  attemptsLeft: Type.Integer(),
  createdAt: Type.String({ format: 'date-time' }),
});
