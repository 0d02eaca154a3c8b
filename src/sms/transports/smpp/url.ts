import { readCaFile, transportHost, transportUrl, wholeParam } from '../../../transport-url.ts';

/**
 * `SMS_TRANSPORT=smpp://systemId:password@host:port?binds=&window=&tps=&urgent=` (and
 * `smpps://…&ca=` for SMPP over TLS): what the SMPP transport (src/sms/transports/smpp/) is told,
 * with its defaults. Read where configuration is read (config.ts), so a wrong one stops a start.
 */
export interface SmppSettings {
  tls: boolean;
  /**
   * `ca=<path of a PEM file>`, over TLS: the certificates the SMSC's must chain to, in place
   * of Node's bundled ones (for an SMSC with a private CA). Unset: the bundled CAs and any in
   * NODE_EXTRA_CA_CERTS. The certificate is verified, and its name checked, always.
   */
  ca: string | undefined;
  host: string;
  port: number;
  systemId: string;
  password: string;
  /**
   * Transceiver binds each worker process holds. Default 2: a lost bind leaves the other
   * sending while it comes back.
   */
  binds: number;
  /**
   * submit_sm a bind has outstanding: sent, and not yet answered and recorded. Default 50, so
   * 2 × 50 = 100 submits a process may have answered and not recorded: the most a crash
   * sends twice (docs/sms.md, "SMS over SMPP": its delivery guarantee).
   */
  window: number;
  /**
   * submit_sm a second across the process's binds (the operator's contract); 0, the default: no cap
   * of Herald's own.
   */
  tps: number;
  /** Share of each bind's window, and of tps, held for one-time passcodes. Default 0.1. */
  urgentShare: number;
}

export const SMPP_DEFAULTS = { port: 2775, tlsPort: 3550, binds: 2, window: 50, tps: 0, urgentShare: 0.1 } as const;

const LIMITS = { binds: [1, 32], window: [1, 1000], tps: [0, 100_000] } as const;
// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it finds
const CONTROL = /[\u0000-\u001f\u007f]/;

/** The settings of an `smpp://` or `smpps://` URL; throws an Error naming the fault (config.ts names the variable). */
export function parseSmppUrl(raw: string): SmppSettings {
  const url = transportUrl(raw, {
    schemes: ['smpp:', 'smpps:'],
    example: 'smpp://systemId:password@host:2775',
    what: 'the SMSC host',
    params: ['binds', 'window', 'tps', 'urgent', 'ca'],
  });
  // SMPP 3.4 §5.2.1 and §5.2.2: system_id is at most 15 octets, password at most 8, each a
  // C-octet string, which a NUL would end early.
  const systemId = decodeURIComponent(url.username);
  if (systemId === '' || Buffer.byteLength(systemId) > 15 || CONTROL.test(systemId))
    throw new Error('must carry a system_id of 1 to 15 octets, no control characters, before the @');
  const password = decodeURIComponent(url.password);
  if (Buffer.byteLength(password) > 8 || CONTROL.test(password))
    throw new Error('password must be at most 8 octets, no control characters (SMPP 3.4 §5.2.2)');
  const whole = (name: keyof typeof LIMITS) => wholeParam(url, name, LIMITS[name], SMPP_DEFAULTS[name]);
  const urgent = url.searchParams.get('urgent');
  const urgentShare = urgent === null || urgent === '' ? SMPP_DEFAULTS.urgentShare : Number(urgent);
  if (!(urgentShare >= 0 && urgentShare < 1))
    throw new Error(`urgent must be a share from 0 to below 1, got "${urgent}"`);
  const tls = url.protocol === 'smpps:';
  return {
    tls,
    ca: certificates(url.searchParams.get('ca'), tls),
    host: transportHost(url),
    port: url.port === '' ? (tls ? SMPP_DEFAULTS.tlsPort : SMPP_DEFAULTS.port) : Number(url.port),
    systemId,
    password,
    binds: whole('binds'),
    window: whole('window'),
    tps: whole('tps'),
    urgentShare,
  };
}

/** `ca=` over TLS only: a private CA's certificates are for the TLS handshake. */
function certificates(path: string | null, tls: boolean): string | undefined {
  if (path === null || path === '') return undefined;
  if (!tls) throw new Error('ca is for smpps:// (SMPP over TLS) only');
  return readCaFile(path);
}
