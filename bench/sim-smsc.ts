/**
 * `herald sim smsc` in a process of its own, as the SMPP benches drive it: SMPP and its control
 * port on free ports, and what the control port tells of what arrived.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { SmscStats } from '../src/sim/smsc.ts';
import { stopProcess } from './herald-process.ts';

const HERALD = new URL('../bin/herald', import.meta.url).pathname;

export interface SimulatorProcess {
  pid: number;
  port: number;
  /** Each recipient with the time (epoch ms) the first part for it arrived. */
  arrivals(): Promise<Map<string, number>>;
  stats(): Promise<SmscStats>;
  reset(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts the simulator with `args` (`herald sim smsc` flags) besides its ports. */
export async function startSimulator(args: string[]): Promise<SimulatorProcess> {
  const child = spawn(HERALD, ['sim', 'smsc', '--port', '0', '--http-port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  const port = Number(/SMPP on [^:]+:(\d+)/.exec(line)![1]);
  const control = /control on (http:\S+)/.exec(line)![1];
  return {
    pid: child.pid!,
    port,
    async arrivals() {
      const { arrivals } = (await (await fetch(`${control}/arrivals`)).json()) as { arrivals: Array<[string, number]> };
      return new Map(arrivals);
    },
    async stats() {
      return (await (await fetch(`${control}/stats`)).json()) as SmscStats;
    },
    async reset() {
      await fetch(`${control}/reset`, { method: 'POST' });
    },
    stop: () => stopProcess(child),
  };
}
