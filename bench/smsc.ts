/**
 * submit_sm per second through `herald sim smsc`, and the simulator's CPU per submit: the
 * simulator runs as the command, in its own process, and ESMEs built on the `smpp` package
 * keep a window of submits outstanding on each bind, with and without a receipt for each.
 * The ESMEs share one process, so with receipts they, not the simulator, set the pace.
 *
 *   npm run bench:smsc                       # 100,000 submits, 2 binds, window 50
 *   BENCH_SUBMITS=200000 BENCH_BINDS=4 BENCH_WINDOW=100 npm run bench:smsc
 */
import { cpuSeconds } from './herald-process.ts';
import { startSimulator } from './sim-smsc.ts';
import { bind, drive } from './smpp-client.ts';

const SUBMITS = Number(process.env.BENCH_SUBMITS ?? 100_000);
const BINDS = Number(process.env.BENCH_BINDS ?? 2);
const WINDOW = Number(process.env.BENCH_WINDOW ?? 50);

async function run(receipts: boolean): Promise<void> {
  const simulator = await startSimulator(['--receipt-delay-ms', '0']);
  try {
    const sessions = await Promise.all(Array.from({ length: BINDS }, () => bind(simulator.port)));
    const cpuBefore = cpuSeconds([simulator.pid]);
    const esmeCpuBefore = process.cpuUsage();
    const started = performance.now();
    await Promise.all(sessions.map((session) => drive(session, SUBMITS / BINDS, receipts, WINDOW)));
    const seconds = (performance.now() - started) / 1000;
    const simulatorCpu = cpuSeconds([simulator.pid]) - cpuBefore;
    const { user, system } = process.cpuUsage(esmeCpuBefore);
    const simulatorUs = ((simulatorCpu / SUBMITS) * 1e6).toFixed(1);
    console.log(
      `${receipts ? 'with receipts   ' : 'without receipts'}: ` +
        `${SUBMITS} submits on ${BINDS} binds, window ${WINDOW}: ` +
        `${Math.round(SUBMITS / seconds)}/s; simulator CPU ${simulatorUs} µs a submit ` +
        `(${Math.round(SUBMITS / simulatorCpu)}/s on one core); ` +
        `the ESMEs' CPU ${((user + system) / SUBMITS).toFixed(1)} µs a submit`,
    );
    for (const session of sessions) session.destroy();
  } finally {
    await simulator.stop();
  }
}

await run(false);
await run(true);
