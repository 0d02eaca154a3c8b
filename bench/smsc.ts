/**
 * submit_sm per second through `herald sim smsc`, and the simulator's CPU per submit: the
 * simulator runs as the command, in its own process, and ESMEs built on the `smpp` package
 * keep a window of submits outstanding on each bind, with and without a receipt for each.
 * The ESMEs share one process, so with receipts they, not the simulator, set the pace.
 *
 *   npm run bench:smsc                       # 100,000 submits, 2 binds, window 50
 *   BENCH_SUBMITS=200000 BENCH_BINDS=4 BENCH_WINDOW=100 npm run bench:smsc
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { bind, drive } from './smpp-client.ts';

const SUBMITS = Number(process.env.BENCH_SUBMITS ?? 100_000);
const BINDS = Number(process.env.BENCH_BINDS ?? 2);
const WINDOW = Number(process.env.BENCH_WINDOW ?? 50);
const HERALD = new URL('../bin/herald', import.meta.url).pathname;
const CLOCK_TICKS_PER_SECOND = 100;

/** CPU seconds a process has used (user + system), from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

async function run(receipts: boolean): Promise<void> {
  const child = spawn(HERALD, ['sim', 'smsc', '--port', '0', '--http-port', '0', '--receipt-delay-ms', '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    const port = Number(/SMPP on [^:]+:(\d+)/.exec(line)![1]);
    const sessions = await Promise.all(Array.from({ length: BINDS }, () => bind(port)));
    const cpuBefore = cpuSeconds(child.pid!);
    const esmeCpuBefore = process.cpuUsage();
    const started = performance.now();
    await Promise.all(sessions.map((session) => drive(session, SUBMITS / BINDS, receipts, WINDOW)));
    const seconds = (performance.now() - started) / 1000;
    const simulatorCpu = cpuSeconds(child.pid!) - cpuBefore;
    const { user, system } = process.cpuUsage(esmeCpuBefore);
    console.log(
      `${receipts ? 'with receipts   ' : 'without receipts'}: ${SUBMITS} submits on ${BINDS} binds, ` +
        `window ${WINDOW}: ` +
        `${Math.round(SUBMITS / seconds)}/s; simulator ` +
        `CPU ${((simulatorCpu / SUBMITS) * 1e6).toFixed(1)} µs a submit ` +
        `(${Math.round(SUBMITS / simulatorCpu)}/s on one core); the ESMEs' ` +
        `CPU ${((user + system) / SUBMITS).toFixed(1)} µs a submit`,
    );
    for (const session of sessions) session.destroy();
  } finally {
    child.kill('SIGTERM');
    await once(child, 'exit');
  }
}

await run(false);
await run(true);
