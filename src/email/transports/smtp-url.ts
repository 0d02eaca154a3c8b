import { readCaFile, transportHost, transportUrl, wholeParam } from '../../transport-url.ts';

/**
 * `EMAIL_TRANSPORT=smtp://user:password@host:port?pool=&rate=&tls=&ca=` (and `smtps://…` for
 * TLS from the first byte): the smarthost relay the SMTP transport (email/transports/smtp.ts)
 * hands every message to, with its defaults. Read where configuration is read (config.ts), so
 * a wrong one stops a start.
 */
export interface SmtpSettings {
  /** `smtps://`: TLS from the first byte (port 465), rather than STARTTLS on a plain connection. */
  implicitTls: boolean;
  /**
   * `tls=starttls` (the default): STARTTLS whenever the relay offers it, in clear when it does
   * not. `tls=require`: STARTTLS or nothing — a relay that does not offer it (or a handshake
   * that fails) defers every message, never sends one in clear. Moot with `smtps://`.
   */
  requireTls: boolean;
  /**
   * `ca=<path of a PEM file>`: the certificates the relay's must chain to, in place of Node's
   * bundled ones (a relay with a private CA). The certificate is verified, and its name checked, always.
   */
  ca: string | undefined;
  host: string;
  port: number;
  /** AUTH credentials; none when the URL names no user (a relay that trusts the sender's address). */
  auth: { user: string; password: string } | undefined;
  /**
   * Connections each worker process holds open to the relay. Default 5, nodemailer's and a common
   * relay's per-client limit.
   */
  pool: number;
  /**
   * Messages a second across the process's connections (shared by every process through Redis when
   * REDIS_URL is set); 0, the default: no cap of Herald's own.
   */
  rate: number;
}

export const SMTP_DEFAULTS = { port: 587, implicitTlsPort: 465, pool: 5, rate: 0 } as const;

const LIMITS = { pool: [1, 100], rate: [0, 100_000] } as const;

/** The settings of an `smtp://` or `smtps://` URL; throws an Error naming the fault (config.ts names the variable). */
export function parseSmtpUrl(raw: string): SmtpSettings {
  const url = transportUrl(raw, {
    schemes: ['smtp:', 'smtps:'],
    example: 'smtp://user:password@relay.example.com:587',
    what: 'the relay host',
    params: ['pool', 'rate', 'tls', 'ca'],
  });
  const user = decodeURIComponent(url.username);
  const password = decodeURIComponent(url.password);
  if (user === '' && password !== '') throw new Error('names a password but no user before it');
  const whole = (name: keyof typeof LIMITS) => wholeParam(url, name, LIMITS[name], SMTP_DEFAULTS[name]);
  const implicitTls = url.protocol === 'smtps:';
  const tls = url.searchParams.get('tls');
  if (tls !== null && tls !== '') {
    if (implicitTls) throw new Error('tls is for smtp:// (STARTTLS); smtps:// is TLS from the first byte');
    if (tls !== 'starttls' && tls !== 'require') throw new Error(`tls must be starttls or require, got "${tls}"`);
  }
  const ca = url.searchParams.get('ca');
  return {
    implicitTls,
    requireTls: tls === 'require',
    ca: ca === null || ca === '' ? undefined : readCaFile(ca),
    host: transportHost(url),
    port: url.port === '' ? (implicitTls ? SMTP_DEFAULTS.implicitTlsPort : SMTP_DEFAULTS.port) : Number(url.port),
    auth: user === '' ? undefined : { user, password },
    pool: whole('pool'),
    rate: whole('rate'),
  };
}
