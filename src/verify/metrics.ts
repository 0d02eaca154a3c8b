import { Counter, type Registry } from 'prom-client';

export interface VerifyMetrics {
  started: Counter<'channel'>;
  checks: Counter<'status'>;
  blocked: Counter<'reason'>;
}

/**
 * Verify in /metrics, per API process (the counts of all of them are GET /verify/stats'):
 * verifications sent (new and resent) by channel, checks by the status they answered, and the
 * attempts the fraud guard blocked by reason — a rise in `prefix` is SMS pumping under way.
 */
export function registerVerifyMetrics(registry: Registry): VerifyMetrics {
  const registers = [registry];
  return {
    started: new Counter({
      name: 'herald_verify_sends_total',
      help: 'Verification codes sent (new and resent), by channel',
      labelNames: ['channel'],
      registers,
    }),
    checks: new Counter({
      name: 'herald_verify_checks_total',
      help: 'Verification checks, by the status they answered (approved, pending, failed, expired)',
      labelNames: ['status'],
      registers,
    }),
    blocked: new Counter({
      name: 'herald_verify_blocked_total',
      help: 'Verifications the fraud guard refused, by reason (country: allowedCountries; prefix: prefixLimit)',
      labelNames: ['reason'],
      registers,
    }),
  };
}
