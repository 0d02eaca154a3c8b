/**
 * What the service's parts log through: pino's logger (Fastify's `app.log`) in a process, or
 * nothing. A line names what it concerns (an account, a job, a connection, a relay host) and
 * never a secret, a token or a person's number or address.
 */
export interface Log {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

export const silentLog: Log = { info() {}, warn() {}, error() {} };
