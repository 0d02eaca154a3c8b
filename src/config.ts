import type { KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import { keyFromHex } from './sealed.ts';
import { parseSmppUrl, type SmppSettings } from './sms/transports/smpp/url.ts';
import { parseSmtpUrl, type SmtpSettings } from './email/transports/smtp-url.ts';

/**
 * Configuration comes from the environment only (ARCHITECTURE.md, "Configuration").
 * Every variable is validated at start so that a typo stops the program with one
 * line naming the variable instead of surfacing later as a confusing failure.
 */
export interface Config {
  port: number;
  host: string;
  /** The listener of a `--role worker` process (probes and metrics), on HOST; the API's is PORT. */
  workerPort: number;
  databaseUrl: string;
  redisUrl: string | undefined;
  publicUrl: string;
  adminToken: string | undefined;
  jwtSecret: string | undefined;
  /**
   * ENCRYPTION_KEY, the key of isBodyEncrypted bodies; when unset, messaging/encryption-key.ts
   * finds or makes one (SQLite) or stops (PostgreSQL).
   */
  encryptionKey: KeyObject | undefined;
  /**
   * ENCRYPTION_KEY_PREVIOUS: keys ENCRYPTION_KEY replaced, newest first, which still open what they
   * sealed (sealed.ts's Keyring).
   */
  previousEncryptionKeys: KeyObject[];
  bodyLimitBytes: number;
  /**
   * TRUST_PROXY, Fastify's trustProxy: which hops of X-Forwarded-For to believe for the
   * client's address (sign-in throttling per client, link misses, logs). false: none, the
   * peer is the client; the proxies' addresses or CIDRs: the client is the last address
   * before them; true: every hop, so a client that reaches the service past the proxy, or a
   * proxy that appends to the header, lets the client name its own address.
   */
  trustProxy: boolean | string[];
  webhookAllowPrivate: boolean;
  defaultSenderName: string;
  /**
   * SMS_TRANSPORT: `sandbox:`, optionally `sandbox:?fail=<regular expression>` (numbers it
   * refuses), or an SMSC: `smpp://systemId:password@host:port?binds=&window=&tps=&urgent=`
   * (`smpps://` over TLS; sms/transports/smpp/url.ts).
   */
  smsTransport: { kind: 'sandbox'; fail: RegExp | undefined } | { kind: 'smpp'; settings: SmppSettings };
  /**
   * SMS_TRANSPORT as it was set, or undefined when unset: `default` is then the sandbox, and once
   * a connection was added (sms/routing/), a number no route matches is not sent.
   */
  smsTransportUrl: string | undefined;
  /**
   * EMAIL_TRANSPORT: `sandbox:`, optionally with `?defer=<regular expression>` (addresses it
   * refuses for now, 4xx) and `&bounce=<regular expression>` (addresses it refuses for good,
   * 5xx), for trying failures in development; or a relay:
   * `smtp://user:password@host:port?pool=&rate=&tls=` (`smtps://` over TLS; email/transports/smtp-url.ts).
   */
  emailTransport:
    | { kind: 'sandbox'; defer: RegExp | undefined; bounce: RegExp | undefined }
    | { kind: 'smtp'; settings: SmtpSettings };
  defaultEmailDomain: string;
  /**
   * EMAIL_RENDER_THREADS: threads that render and sign emails in a worker process
   * (email/render-pool.ts); one a core but the event loop's, 1 to 4, unless set.
   */
  emailRenderThreads: number;
  /**
   * BOUNCE_DOMAIN: the domain of VERP return paths (`bounces+<token>@…`) and of List-Unsubscribe's
   * `mailto:`; DEFAULT_EMAIL_DOMAIN when unset.
   */
  bounceDomain: string;
  /** INBOUND_SMTP_PORT: the SMTP listener for bounces, complaints and unsubscribe mail, on HOST; off when unset. */
  inboundSmtpPort: number | undefined;
  logLevel: string;
  /** After SIGTERM, how long running jobs may take before the process exits without them. */
  shutdownGraceSeconds: number;
  /** How long a claimed job's lease lasts unrenewed: how soon another worker takes over the jobs of one that died. */
  jobLeaseSeconds: number;
  /**
   * Days after a send completes before its bodies, tags and sandbox records are purged
   * (src/messaging/retention.ts).
   */
  retentionDays: number;
  /** AUDIT_RETENTION_DAYS: how long the audit log keeps an entry (src/audit/entries.ts). */
  auditRetentionDays: number;
  /**
   * SMS_RECEIPT_TIMEOUT_HOURS: a message without a final receipt this long after its send completed
   * ends Failed (sms/expiry.ts).
   */
  smsReceiptTimeoutHours: number;
}

export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`invalid ${variable}: ${problem}`);
    this.variable = variable;
  }
}

type Env = Record<string, string | undefined>;

function read(env: Env, name: string, fallback: string): string {
  const value = env[name];
  return value === undefined || value === '' ? fallback : value;
}

function optional(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = read(env, name, String(fallback));
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(name, `must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return Number(raw);
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = read(env, name, String(fallback)).toLowerCase();
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

function url(env: Env, name: string, fallback: string | undefined, protocols: string[]): string | undefined {
  const raw = fallback === undefined ? optional(env, name) : read(env, name, fallback);
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, `must be a URL, got "${withoutPassword(raw)}"`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(
      name,
      `must start with ${protocols.map((p) => `${p}`).join(' or ')}, got "${withoutPassword(raw)}"`,
    );
  }
  return raw;
}

const SMS_TRANSPORT_FORMS = 'sandbox:, sandbox:?fail=<regular expression> or smpp://systemId:password@host:port';
const EMAIL_TRANSPORT_FORMS =
  'sandbox:, sandbox:?defer=<regular expression>&bounce=<regular expression> or smtp://user:password@host:port';

/**
 * A URL as an error may show it: all before its last @ (a user and password) left out but its
 * scheme, however malformed the URL (no scheme, no //, an @ in the password), and the value of
 * any password= (in a query, or PostgreSQL's keyword/value form).
 */
const withoutPassword = (url: string) =>
  url.replace(/^([a-z][a-z0-9+.-]*:\/\/)?.*@/is, '$1…@').replace(/(password\s*=\s*)('[^']*'?|[^&\s]*)/gi, '$1…');

function smsTransportSetting(raw: string): Config['smsTransport'] {
  try {
    return parseSmsTransport(raw);
  } catch (error) {
    throw new ConfigError('SMS_TRANSPORT', (error as Error).message);
  }
}

/**
 * An SMS transport URL, as SMS_TRANSPORT and an added SMSC connection (sms/routing/) take it;
 * throws an Error naming the fault, the URL's password left out.
 */
export function parseSmsTransport(raw: string): Config['smsTransport'] {
  if (/^smpps?:/.test(raw)) return { kind: 'smpp', settings: parseSmppUrl(raw) };
  const match = /^sandbox:(?:\?fail=(.+))?$/.exec(raw);
  if (!match) throw new Error(`must be ${SMS_TRANSPORT_FORMS}, got "${withoutPassword(raw)}"`);
  if (match[1] === undefined) return { kind: 'sandbox', fail: undefined };
  try {
    return { kind: 'sandbox', fail: new RegExp(decodeURIComponent(match[1])) };
  } catch {
    throw new Error(`fail= must be a regular expression, got "${match[1]}"`);
  }
}

function emailTransportSetting(raw: string): Config['emailTransport'] {
  if (/^smtps?:/.test(raw)) {
    try {
      return { kind: 'smtp', settings: parseSmtpUrl(raw) };
    } catch (error) {
      throw new ConfigError('EMAIL_TRANSPORT', (error as Error).message);
    }
  }
  const match = /^sandbox:(?:\?(.*))?$/.exec(raw);
  if (!match)
    throw new ConfigError('EMAIL_TRANSPORT', `must be ${EMAIL_TRANSPORT_FORMS}, got "${withoutPassword(raw)}"`);
  const setting = {
    kind: 'sandbox' as const,
    defer: undefined as RegExp | undefined,
    bounce: undefined as RegExp | undefined,
  };
  for (const [name, value] of new URLSearchParams(match[1] ?? '')) {
    if (name !== 'defer' && name !== 'bounce')
      throw new ConfigError('EMAIL_TRANSPORT', `sandbox: takes defer= and bounce=, not ${name}=`);
    try {
      setting[name] = new RegExp(value, 'i');
    } catch {
      throw new ConfigError('EMAIL_TRANSPORT', `${name}= must be a regular expression, got "${value}"`);
    }
  }
  return setting;
}

// Addresses that name no one host a link could reach: every interface, or this machine's loopback.
const LOCAL_HOSTS = new Set(['0.0.0.0', '::', '127.0.0.1', '::1', 'localhost']);

/**
 * PUBLIC_URL unless set (ARCHITECTURE.md, "Reads gain what was sent"): where this listener
 * answers, `http://localhost:<PORT>`, or `http://<HOST>:<PORT>` when HOST names one address
 * another machine could reach.
 */
function defaultPublicUrl(host: string, port: number): string {
  const name = LOCAL_HOSTS.has(host.toLowerCase()) ? 'localhost' : isIP(host) === 6 ? `[${host}]` : host;
  return `http://${name}:${port}`;
}

// proxy-addr's names for the ranges a proxy on the same host or network usually has.
const PROXY_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

function trustProxySetting(raw: string): Config['trustProxy'] {
  if (/^(true|1)$/i.test(raw)) return true;
  if (/^(false|0)$/i.test(raw)) return false;
  const proxies = raw.split(',').map((entry) => entry.trim());
  for (const proxy of proxies) {
    const [address, bits, extra] = proxy.split('/');
    const family = isIP(address);
    const prefixOk = bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 6 ? 128 : 32));
    if (!PROXY_RANGES.has(proxy) && (family === 0 || !prefixOk || extra !== undefined)) {
      const form = "true, false, or the proxies' addresses or CIDRs (or loopback, linklocal, uniquelocal), with commas";
      throw new ConfigError('TRUST_PROXY', `must be ${form}, got "${proxy}"`);
    }
  }
  return proxies;
}

export function loadConfig(env: Env = process.env): Config {
  const jwtSecret = optional(env, 'JWT_SECRET');
  if (jwtSecret !== undefined && Buffer.byteLength(jwtSecret) < 32) {
    // RFC 7518 §3.2: an HS256 key must be at least as long as the hash output.
    throw new ConfigError('JWT_SECRET', 'must be at least 32 bytes long');
  }
  const encryptionKeyHex = optional(env, 'ENCRYPTION_KEY');
  const encryptionKey = encryptionKeyHex === undefined ? undefined : keyFromHex(encryptionKeyHex);
  if (encryptionKeyHex !== undefined && !encryptionKey) {
    // The value is a secret: not repeated in the message, which lands in logs.
    throw new ConfigError(
      'ENCRYPTION_KEY',
      'must be 64 hex characters (a 32-byte key), such as the output of openssl rand -hex 32',
    );
  }
  const previousEncryptionKeys = (optional(env, 'ENCRYPTION_KEY_PREVIOUS') ?? '')
    .split(',')
    .filter((hex) => hex.trim() !== '')
    .map((hex) => keyFromHex(hex.trim()));
  if (previousEncryptionKeys.some((key) => key === undefined)) {
    throw new ConfigError(
      'ENCRYPTION_KEY_PREVIOUS',
      'must be keys of 64 hex characters each, separated by commas, newest first',
    );
  }
  if (previousEncryptionKeys.length > 0 && !encryptionKey) {
    throw new ConfigError('ENCRYPTION_KEY_PREVIOUS', 'needs ENCRYPTION_KEY: the key that replaced them');
  }
  const adminToken = optional(env, 'ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new ConfigError('ADMIN_TOKEN', 'must be at least 16 characters long');
  }
  const defaultSenderName = read(env, 'DEFAULT_SENDER_NAME', 'HERALD');
  if (!/^[A-Za-z0-9 ]{1,11}$/.test(defaultSenderName)) {
    throw new ConfigError(
      'DEFAULT_SENDER_NAME',
      'must be 1 to 11 letters, digits or spaces (an alphanumeric sender ID)',
    );
  }
  const smsTransportUrl = optional(env, 'SMS_TRANSPORT');
  const smsTransport = smsTransportSetting(smsTransportUrl ?? 'sandbox:');
  const defaultEmailDomain = read(env, 'DEFAULT_EMAIL_DOMAIN', 'mail.localhost');
  if (!isHostname(defaultEmailDomain)) {
    throw new ConfigError('DEFAULT_EMAIL_DOMAIN', `must be a domain name, got "${defaultEmailDomain}"`);
  }
  const bounceDomain = read(env, 'BOUNCE_DOMAIN', defaultEmailDomain);
  if (!isHostname(bounceDomain)) {
    throw new ConfigError('BOUNCE_DOMAIN', `must be a domain name, got "${bounceDomain}"`);
  }
  const logLevel = read(env, 'LOG_LEVEL', 'info');
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(
      'LOG_LEVEL',
      `must be one of fatal, error, warn, info, debug, trace, silent, got "${logLevel}"`,
    );
  }
  const databaseUrl = read(env, 'DATABASE_URL', 'sqlite:./data/herald.db');
  if (!/^sqlite:.+/.test(databaseUrl) && !/^postgres(ql)?:\/\/.+/.test(databaseUrl)) {
    throw new ConfigError(
      'DATABASE_URL',
      `must be sqlite:<path> or postgres://…, got "${withoutPassword(databaseUrl)}"`,
    );
  }
  const port = integer(env, 'PORT', 8080, 0, 65535);
  const host = read(env, 'HOST', '127.0.0.1');
  return {
    port,
    host,
    workerPort: integer(env, 'WORKER_PORT', 8081, 0, 65535),
    databaseUrl,
    redisUrl: url(env, 'REDIS_URL', undefined, ['redis:', 'rediss:']),
    publicUrl: url(env, 'PUBLIC_URL', defaultPublicUrl(host, port), ['http:', 'https:'])!.replace(/\/+$/, ''),
    adminToken,
    jwtSecret,
    encryptionKey,
    previousEncryptionKeys: previousEncryptionKeys as KeyObject[],
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 5 * 1024 * 1024, 1024, 100 * 1024 * 1024),
    trustProxy: trustProxySetting(read(env, 'TRUST_PROXY', 'false')),
    webhookAllowPrivate: boolean(env, 'WEBHOOK_ALLOW_PRIVATE', false),
    defaultSenderName,
    smsTransport,
    smsTransportUrl,
    emailTransport: emailTransportSetting(read(env, 'EMAIL_TRANSPORT', 'sandbox:')),
    defaultEmailDomain: defaultEmailDomain.toLowerCase(),
    bounceDomain: bounceDomain.toLowerCase(),
    emailRenderThreads: integer(
      env,
      'EMAIL_RENDER_THREADS',
      Math.max(1, Math.min(4, availableParallelism() - 1)),
      1,
      64,
    ),
    inboundSmtpPort:
      optional(env, 'INBOUND_SMTP_PORT') === undefined ? undefined : integer(env, 'INBOUND_SMTP_PORT', 0, 0, 65535),
    logLevel,
    shutdownGraceSeconds: integer(env, 'SHUTDOWN_GRACE_SECONDS', 30, 0, 3600),
    jobLeaseSeconds: integer(env, 'JOB_LEASE_SECONDS', 30, 1, 3600),
    retentionDays: integer(env, 'RETENTION_DAYS', 30, 1, 36_500),
    auditRetentionDays: integer(env, 'AUDIT_RETENTION_DAYS', 365, 1, 36_500),
    smsReceiptTimeoutHours: integer(env, 'SMS_RECEIPT_TIMEOUT_HOURS', 48, 1, 24 * 30),
  };
}

export function isHostname(value: string): boolean {
  return value.length <= 253 && /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))+$/.test(value);
}
