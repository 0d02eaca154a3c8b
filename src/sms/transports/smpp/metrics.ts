import { Counter, Gauge, type Registry } from 'prom-client';
import type { BindState } from './bind.ts';

/** A counter of one connection: its `smsc` label given. */
interface ConnectionCounter<L extends string> {
  inc(labels: Record<L, string>): void;
}

export interface SmppMetrics {
  submits: ConnectionCounter<'priority'>;
  responses: ConnectionCounter<'status'>;
  resubmits: ConnectionCounter<'reason'>;
  receipts: ConnectionCounter<'state'>;
  /** The connection's gauges stop being reported (its transport closed). */
  release(): void;
}

/** What a connection's gauges read when scraped. */
interface GaugeSource {
  windowInUse(): number;
  windowSize(): number;
  binds(): BindState[];
}

interface RegistryMetrics {
  submits: Counter<'smsc' | 'priority'>;
  responses: Counter<'smsc' | 'status'>;
  resubmits: Counter<'smsc' | 'reason'>;
  receipts: Counter<'smsc' | 'state'>;
  sources: Map<string, GaugeSource>;
}

const NAMES = [
  'herald_smpp_submits_total',
  'herald_smpp_responses_total',
  'herald_smpp_resubmits_total',
  'herald_smpp_receipts_total',
  'herald_smpp_window_in_use',
  'herald_smpp_window_size',
  'herald_smpp_binds',
] as const;

const byRegistry = new WeakMap<Registry, RegistryMetrics>();

/**
 * The SMPP transports' figures in /metrics, each labelled by its connection (`smsc`): submits by
 * priority, submit_sm_resp by command_status, parts sent again and why, receipts by state, and —
 * read when scraped — window slots in use and binds by state. One set per registry, which every
 * connection's transport reports into; a transport made again under the same name (a worker built
 * again on one registry, in tests) takes its connection's gauges over.
 */
export function registerSmppMetrics(registry: Registry, smsc: string, read: GaugeSource): SmppMetrics {
  const shared = byRegistry.get(registry) ?? createMetrics(registry);
  shared.sources.set(smsc, read);
  const bound = <L extends string>(counter: Counter<'smsc' | L>): ConnectionCounter<L> => ({
    inc: (labels) => counter.inc({ smsc, ...labels } as Record<'smsc' | L, string>),
  });
  return {
    submits: bound(shared.submits),
    responses: bound(shared.responses),
    resubmits: bound(shared.resubmits),
    receipts: bound(shared.receipts),
    release: () => {
      if (shared.sources.get(smsc) === read) shared.sources.delete(smsc);
    },
  };
}

function createMetrics(registry: Registry): RegistryMetrics {
  for (const name of NAMES) registry.removeSingleMetric(name);
  const registers = [registry];
  const sources = new Map<string, GaugeSource>();
  const metrics: RegistryMetrics = {
    submits: new Counter({
      name: NAMES[0],
      help: 'submit_sm sent, by connection and priority (urgent: one-time passcodes)',
      labelNames: ['smsc', 'priority'],
      registers,
    }),
    responses: new Counter({
      name: NAMES[1],
      help: 'submit_sm_resp received, by connection and command_status',
      labelNames: ['smsc', 'status'],
      registers,
    }),
    resubmits: new Counter({
      name: NAMES[2],
      help: 'parts sent again, by connection: throttled by the SMSC, or unanswered when a bind was lost',
      labelNames: ['smsc', 'reason'],
      registers,
    }),
    receipts: new Counter({
      name: NAMES[3],
      help: 'delivery receipts received, by connection and state',
      labelNames: ['smsc', 'state'],
      registers,
    }),
    sources,
  };
  new Gauge({
    name: NAMES[4],
    help: 'submit_sm sent and not yet answered, across binds, by connection',
    labelNames: ['smsc'],
    registers,
    collect() {
      this.reset();
      for (const [smsc, read] of sources) this.set({ smsc }, read.windowInUse());
    },
  });
  new Gauge({
    name: NAMES[5],
    help: 'window slots across binds (binds × window), by connection',
    labelNames: ['smsc'],
    registers,
    collect() {
      this.reset();
      for (const [smsc, read] of sources) this.set({ smsc }, read.windowSize());
    },
  });
  new Gauge({
    name: NAMES[6],
    help: 'SMPP binds by connection and state',
    labelNames: ['smsc', 'state'],
    registers,
    collect() {
      this.reset();
      for (const [smsc, read] of sources) {
        const states = read.binds();
        for (const state of ['down', 'connecting', 'bound', 'closed'] as const)
          this.set({ smsc, state }, states.filter((s) => s === state).length);
      }
    },
  });
  byRegistry.set(registry, metrics);
  return metrics;
}
