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
import smpp from 'smpp';

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

async function bind(port: number) {
  const session = smpp.connect({ host: '127.0.0.1', port });
  await once(session, 'connect');
  await new Promise<void>((resolve, reject) =>
    session.bind_transceiver({ system_id: 'bench', password: 'bench' }, (pdu) => (pdu.command_status === 0 ? resolve() : reject(new Error('bind refused')))),
  );
  return session;
}

/** Sends `count` submits on one bind with at most WINDOW outstanding; resolves when all are answered and, if asked, receipted. */
function drive(session: smpp.Session, count: number, receipts: boolean): Promise<void> {
  const short_message = Buffer.from('Your code is 123456. Do not share it.');
  return new Promise((resolve) => {
    let sent = 0;
    let answered = 0;
    let receipted = 0;
    const done = () => answered === count && (!receipts || receipted === count) && resolve();
    session.on('deliver_sm', (pdu) => {
      session.send(pdu.response());
      receipted++;
      done();
    });
    const next = () => {
      if (sent === count) return;
      sent++;
      session.submit_sm(
        { source_addr: 'HERALD', source_addr_ton: 5, destination_addr: '447700900123', dest_addr_ton: 1, dest_addr_npi: 1, data_coding: 0, registered_delivery: receipts ? 1 : 0, short_message },
        () => {
          answered++;
          next();
          done();
        },
      );
    };
    for (let i = 0; i < WINDOW; i++) next();
  });
}

async function run(receipts: boolean): Promise<void> {
  const child = spawn(HERALD, ['sim', 'smsc', '--port', '0', '--http-port', '0', '--receipt-delay-ms', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    const port = Number(/SMPP on [^:]+:(\d+)/.exec(line)![1]);
    const sessions = await Promise.all(Array.from({ length: BINDS }, () => bind(port)));
    const cpuBefore = cpuSeconds(child.pid!);
    const esmeCpuBefore = process.cpuUsage();
    const started = performance.now();
    await Promise.all(sessions.map((session) => drive(session, SUBMITS / BINDS, receipts)));
    const seconds = (performance.now() - started) / 1000;
    const simulatorCpu = cpuSeconds(child.pid!) - cpuBefore;
    const { user, system } = process.cpuUsage(esmeCpuBefore);
    console.log(
      `${receipts ? 'with receipts   ' : 'without receipts'}: ${SUBMITS} submits on ${BINDS} binds, window ${WINDOW}: ` +
        `${Math.round(SUBMITS / seconds)}/s; simulator CPU ${((simulatorCpu / SUBMITS) * 1e6).toFixed(1)} µs a submit ` +
        `(${Math.round(SUBMITS / simulatorCpu)}/s on one core); the ESMEs' CPU ${((user + system) / SUBMITS).toFixed(1)} µs a submit`,
    );
    for (const session of sessions) session.destroy();
  } finally {
    child.kill('SIGTERM');
    await once(child, 'exit');
  }
}

await run(false);
await run(true);
