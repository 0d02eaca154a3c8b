import { Counter, Gauge, type Registry } from 'prom-client';
import type { BindState } from './bind.ts';

export interface SmppMetrics {
  submits: Counter<'priority'>;
  responses: Counter<'status'>;
  resubmits: Counter<'reason'>;
  receipts: Counter<'state'>;
}

/**
 * The SMPP transport's figures in /metrics: submits by priority, submit_sm_resp by
 * command_status, parts sent again and why, receipts by state, and — read when scraped — window
 * slots in use and binds by state.
 */
export function registerSmppMetrics(
  registry: Registry,
  read: { windowInUse(): number; windowSize(): number; binds(): BindState[] },
): SmppMetrics {
  const names = [
    'herald_smpp_submits_total',
    'herald_smpp_responses_total',
    'herald_smpp_resubmits_total',
    'herald_smpp_receipts_total',
    'herald_smpp_window_in_use',
    'herald_smpp_window_size',
    'herald_smpp_binds',
  ];
  // A worker built again on one registry (tests) reports its own transport.
  for (const name of names) registry.removeSingleMetric(name);
  const registers = [registry];
  const metrics: SmppMetrics = {
    submits: new Counter({
      name: names[0],
      help: 'submit_sm sent, by priority (urgent: one-time passcodes)',
      labelNames: ['priority'],
      registers,
    }),
    responses: new Counter({
      name: names[1],
      help: 'submit_sm_resp received, by command_status',
      labelNames: ['status'],
      registers,
    }),
    resubmits: new Counter({
      name: names[2],
      help: 'parts sent again: throttled by the SMSC, or unanswered when a bind was lost',
      labelNames: ['reason'],
      registers,
    }),
    receipts: new Counter({
      name: names[3],
      help: 'delivery receipts received, by state',
      labelNames: ['state'],
      registers,
    }),
  };
  new Gauge({
    name: names[4],
    help: 'submit_sm sent and not yet answered and recorded, across binds',
    registers,
    collect() {
      this.set(read.windowInUse());
    },
  });
  new Gauge({
    name: names[5],
    help: 'window slots across binds (binds × window)',
    registers,
    collect() {
      this.set(read.windowSize());
    },
  });
  new Gauge({
    name: names[6],
    help: 'SMPP binds by state',
    labelNames: ['state'],
    registers,
    collect() {
      const states = read.binds();
      for (const state of ['down', 'connecting', 'bound', 'closed'] as const)
        this.set({ state }, states.filter((s) => s === state).length);
    },
  });
  return metrics;
}
