import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { ManualClock } from '../../src/clock.ts';
import { startSmsc, type Smsc } from '../../src/sim/smsc.ts';
import type { InboundSms, OutgoingSms, SmsTransport } from '../../src/sms/transport.ts';
import { outgoingMessages } from './smpp-support.ts';
import { SharedSendRate } from '../../src/ratelimit/shared-send-rate.ts';
import { smppTransport } from '../../src/sms/transports/smpp/transport.ts';
import { receiveInboundSms } from '../../src/sms/inbound.ts';
import { parseSmppUrl } from '../../src/sms/transports/smpp/url.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { REDIS_URL, redisPrefix } from '../support/redis.ts';
import { waitFor } from '../support/wait.ts';

interface Entry {
  level: 'info' | 'warn';
  object: Record<string, unknown>;
  message: string;
}

/**
 * One process's view of a shared rate (or several processes', one each), spent as fast as it
 * gives tokens: take until refused, then wait for its `ready`.
 */
function processRate(options: {
  tps: number;
  urgentShare: number;
  prefix: string;
  redisUrl?: string;
  account?: string;
}) {
  const waiters = new Set<() => void>();
  const logged: Entry[] = [];
  const rate = new SharedSendRate({
    tps: options.tps,
    urgentShare: options.urgentShare,
    monotonic: () => performance.now(),
    ready: () => {
      for (const wake of waiters) wake();
      waiters.clear();
    },
    redisUrl: options.redisUrl ?? REDIS_URL,
    account: options.account ?? '127.0.0.1:2775:herald',
    keyPrefix: options.prefix,
    name: 'the SMPP submit rate',
    log: {
      info: (object, message) => logged.push({ level: 'info', object: object as Record<string, unknown>, message }),
      warn: (object, message) => logged.push({ level: 'warn', object: object as Record<string, unknown>, message }),
    },
  });
  /** The tokens taken in `ms` for one lane, as fast as they come. */
  async function spend(urgent: boolean, ms: number): Promise<number> {
    const until = performance.now() + ms;
    let taken = 0;
    while (performance.now() < until) {
      if (rate.take(urgent, 1000)) {
        taken++;
        continue;
      }
      await new Promise<void>((resolve) => {
        waiters.add(resolve);
        setTimeout(resolve, Math.max(0, until - performance.now()));
      });
    }
    return taken;
  }
  return { rate, spend, logged };
}

/**
 * A TCP relay to Redis that can be cut (every connection dropped, new ones refused) and restored
 * on the same port; `onCommand` is given each command its clients send, as its arguments, and
 * Redis's answers reach the clients `answerDelayMs` late, as from a Redis far away.
 */
async function redisRelay(options: { onCommand?: (args: string[]) => void; answerDelayMs?: number } = {}) {
  const { onCommand, answerDelayMs = 0 } = options;
  const upstream = new URL(REDIS_URL);
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  const listen = async (port: number) => {
    server = createServer((client) => {
      const redis = connect(Number(upstream.port || 6379), upstream.hostname);
      for (const socket of [client, redis]) {
        sockets.add(socket);
        socket.on('error', () => {});
        socket.on('close', () => {
          sockets.delete(socket);
          client.destroy();
          redis.destroy();
        });
      }
      if (onCommand) client.on('data', commandsOf(onCommand));
      client.pipe(redis);
      if (answerDelayMs === 0) redis.pipe(client);
      else redis.on('data', (chunk) => setTimeout(() => client.write(chunk), answerDelayMs));
    });
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    return (server.address() as AddressInfo).port;
  };
  const port = await listen(0);
  return {
    url: `redis://127.0.0.1:${port}`,
    async cut() {
      const closed = new Promise((resolve) => server!.close(resolve));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
    restore: () => listen(port),
    close() {
      server?.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}

/**
 * A client's stream of commands, as chunks come, to `onCommand`: each a RESP array of bulk
 * strings (what ioredis sends; an inline command is skipped to its line's end).
 */
function commandsOf(onCommand: (args: string[]) => void): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  /** The line at `at` and where the next begins, or undefined if it has not all come. */
  const line = (at: number) => {
    const end = pending.indexOf('\r\n', at);
    return end < 0 ? undefined : { text: pending.toString('latin1', at, end), next: end + 2 };
  };
  const command = (): { args: string[]; next: number } | undefined => {
    const head = line(0);
    if (!head) return undefined;
    if (!head.text.startsWith('*')) return { args: [], next: head.next };
    const args: string[] = [];
    let at = head.next;
    for (let i = 0; i < Number(head.text.slice(1)); i++) {
      const size = line(at);
      if (!size) return undefined;
      const end = size.next + Number(size.text.slice(1));
      if (end + 2 > pending.length) return undefined;
      args.push(pending.toString('utf8', size.next, end));
      at = end + 2;
    }
    return { args, next: at };
  };
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    for (let next = command(); next; next = command()) {
      if (next.args.length > 0) onCommand(next.args);
      pending = pending.subarray(next.next);
    }
  };
}

/**
 * The SMPP submit rate shared through the real Redis. The bound the tests hold it to: a
 * lease's tokens are spent within LEASE_MS (0.1 s) of being granted and the Redis buckets
 * grant at most a tenth of a second's tokens beyond their rate, so in T seconds the processes
 * together take at most tps × (T + 0.2); each process alone would take that much by itself.
 */
describe('the SMPP submit rate shared through Redis', () => {
  const { prefix, clean } = redisPrefix('smpp-rate');
  after(async () => {
    await clean();
  });

  it('holds two processes to one budget, 160/s −25 % to +20 %, both drawing on it, a round trip a lease', async () => {
    // Every command the two processes send Redis, as the relay passes it: their leases are counted.
    // (Redis's MONITOR would see them too, but ioredis fails it at times when another client's
    // command comes as it starts: "Command queue state error".)
    let leases = 0;
    const relay = await redisRelay({
      onCommand: (args) => {
        if (/^eval/i.test(args[0]) && args[3] === `${prefix}{127.0.0.1:2775:herald}`) leases++;
      },
    });
    // 200 tps, a fifth for passcodes: campaigns 160 a second in all.
    const a = processRate({ tps: 200, urgentShare: 0.2, prefix, redisUrl: relay.url });
    const b = processRate({ tps: 200, urgentShare: 0.2, prefix, redisUrl: relay.url });
    const redis = new Redis(REDIS_URL);
    try {
      // Each process's connection and scripts made before the timed window, which they would cost on a busy machine.
      await Promise.all([a.spend(false, 50), b.spend(false, 50)]);
      leases = 0;
      const [takenA, takenB] = await Promise.all([a.spend(false, 1500), b.spend(false, 1500)]);
      const taken = takenA + takenB;
      // 1.5 s of the rate, the tenth of a second the bucket lends, a lease in hand and one granted as the
      // window opened per process: 272 at most, and 271 was seen on a loaded machine. Two budgets: 480.
      assert.ok(taken <= 160 * 1.5 * 1.2, `${taken} taken in 1.5 s at 160 a second`);
      assert.ok(taken >= 160 * 1.5 * 0.75, `${taken} taken in 1.5 s: the budget was not spent`);
      for (const one of [takenA, takenB])
        assert.ok(one >= taken * 0.2, `each process draws on the budget (${takenA} and ${takenB})`);
      // 160 a second leased 4 at a time (25 ms of the rate): a lease brings all 4, but for the
      // last ones, still accruing when the time was up.
      assert.ok(leases > 0 && leases <= taken / 3, `${leases} leases for ${taken} tokens`);
      await Promise.all([a.rate.close(), b.rate.close()]);
      // A process that closed is counted no longer.
      assert.equal(await redis.zcard(`${prefix}{127.0.0.1:2775:herald}:processes`), 0);
    } finally {
      await Promise.all([a.rate.close(), b.rate.close()]);
      redis.disconnect();
      relay.close();
    }
  });

  it('keeps the passcodes’ 50/s −25 % beside two campaigns on the rest +13 %, and accounts apart', async () => {
    const a = processRate({ tps: 100, urgentShare: 0.5, prefix });
    const b = processRate({ tps: 100, urgentShare: 0.5, prefix });
    const other = processRate({ tps: 100, urgentShare: 0.5, prefix, account: '127.0.0.1:2775:another' });
    try {
      const [campaignA, campaignB, passcodes, elsewhere] = await Promise.all([
        a.spend(false, 1500),
        b.spend(false, 1500),
        b.spend(true, 1500),
        other.spend(false, 1500),
      ]);
      const campaigns = campaignA + campaignB;
      assert.ok(campaigns <= 50 * (1.5 + 0.2), `campaigns took ${campaigns} in 1.5 s, beyond their 50 a second`);
      assert.ok(passcodes >= 50 * 1.5 * 0.75, `passcodes took ${passcodes} in 1.5 s, short of their 50 a second`);
      assert.ok(campaigns + passcodes <= 100 * (1.5 + 0.2), `${campaigns + passcodes} in 1.5 s at 100 a second`);
      // Another SMSC account's budget is its own: spent on it alone, it is not shared with these.
      assert.ok(elsewhere >= 50 * 1.5 * 0.75, `the other account took ${elsewhere}`);
    } finally {
      await Promise.all([a.rate.close(), b.rate.close(), other.rate.close()]);
    }
  });

  it('keeps a lane’s 50/s −25 % to +13 % when Redis answers 60 ms late', async () => {
    // 50 a second is a token every 20 ms: a lease of 25 ms of the rate is one token, one a round trip.
    const relay = await redisRelay({ answerDelayMs: 60 });
    const far = processRate({ tps: 100, urgentShare: 0.5, prefix, redisUrl: relay.url, account: '127.0.0.1:2775:far' });
    try {
      await far.spend(false, 200);
      const taken = await far.spend(false, 1500);
      assert.ok(taken >= 50 * 1.5 * 0.75, `${taken} taken in 1.5 s, short of 50 a second`);
      assert.ok(taken <= 50 * (1.5 + 0.2), `${taken} taken in 1.5 s, beyond 50 a second`);
    } finally {
      await far.rate.close();
      relay.close();
    }
  });

  it('falls back to its share, 80/s −60 % to +20 %, when Redis goes; logs it, shares again once back', async () => {
    const relay = await redisRelay();
    const a = processRate({ tps: 200, urgentShare: 0.2, prefix, redisUrl: relay.url });
    const b = processRate({ tps: 200, urgentShare: 0.2, prefix });
    const redis = new Redis(REDIS_URL);
    try {
      // Both counted by Redis, and a told so by a lease after b's first. On a busy machine a fixed 300 ms
      // was not enough: the fall back logged was [1, 200], a's view before b's first lease (or a's own
      // first connection past its patience, logged before the cut).
      await Promise.all([a.spend(false, 300), b.spend(false, 300)]);
      await waitFor('both processes counted', async () =>
        (await redis.zcard(`${prefix}{127.0.0.1:2775:herald}:processes`)) === 2 ? true : undefined,
      );
      await waitFor('a sharing the rate', async () => (a.logged.at(-1)?.level === 'warn' ? undefined : true));
      await Promise.all([a.spend(false, 100), b.spend(false, 100)]);
      a.logged.length = 0;
      await relay.cut();
      // Alone of two: half of 160 a second for campaigns, about 80 a second.
      const taken = await a.spend(false, 1500);
      const fallback = a.logged.find((entry) => entry.level === 'warn');
      assert.ok(fallback, 'the fall back is logged');
      assert.match(fallback.message, /Redis is unreachable/);
      assert.deepEqual([fallback.object.processes, fallback.object.tps], [2, 100]);
      assert.ok(taken >= 80 * 1.0 * 0.6, `${taken} taken: submits go on without Redis`);
      assert.ok(taken <= 80 * 1.5 + 8 + 160 * 0.1, `${taken} taken in 1.5 s, beyond the process's share`);
      await relay.restore();
      await waitFor('the rate shared again', async () =>
        a.logged.some((entry) => entry.level === 'info' && /shared again/.test(entry.message)) ? true : undefined,
      );
      assert.ok((await a.spend(false, 200)) > 0);
    } finally {
      await a.rate.close();
      await b.rate.close();
      redis.disconnect();
      relay.close();
    }
  });

  it('falls back to the whole tps within 1 s when Redis was never reached, campaigns 80/s −20 %', async () => {
    const relay = await redisRelay();
    await relay.cut();
    const a = processRate({ tps: 100, urgentShare: 0.2, prefix, redisUrl: relay.url });
    try {
      const started = performance.now();
      assert.equal(await a.spend(true, 1), 0);
      await waitFor('the fall back', async () => (a.logged.length > 0 ? true : undefined));
      assert.ok(performance.now() - started < 1000, `fell back after ${performance.now() - started} ms`);
      assert.deepEqual([a.logged[0].object.processes, a.logged[0].object.tps], [1, 100]);
      assert.ok((await a.spend(false, 500)) >= 8 + 80 * 0.5 * 0.6);
    } finally {
      await a.rate.close();
      relay.close();
    }
  });
});

/** The most submits any one second holds, of these arrival times (epoch ms). */
function busiestSecond(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let first = 0, last = 0; first < sorted.length; first++) {
    while (last < sorted.length && sorted[last] < sorted[first] + 1000) last++;
    most = Math.max(most, last - first);
  }
  return most;
}

/**
 * Two worker processes' transports (each its own binds, window and Redis connection, as
 * separate processes have) sending on one SMSC account whose contract the simulator enforces
 * across binds (accountTps), against the real Redis.
 */
forEachDatabase((dialect) => {
  const { prefix, clean } = redisPrefix('smpp-transport-rate');
  let database: TestDatabase;
  let smsc: Smsc;
  let transports: SmsTransport[] = [];
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(async () => {
    await Promise.all(transports.map((transport) => transport.close()));
    transports = [];
    await smsc.close();
    await database.close();
    await clean();
  });

  const message = outgoingMessages();

  it('holds two processes’ campaigns to 50/s +40 % at the SMSC, passcodes ahead', { timeout: 30_000 }, async () => {
    // The operator's contract: 100 a second across every bind of the account.
    smsc = await startSmsc({ accountTps: 100, receiptDelayMs: 10 });
    // Half of it held for passcodes: campaigns 50 a second in all.
    const settings = parseSmppUrl(`smpp://herald:secret@127.0.0.1:${smsc.port}?binds=1&tps=100&urgent=0.5`);
    const clock = new ManualClock(Date.now());
    const receiveInbound = (mo: InboundSms) => receiveInboundSms(database, clock, mo, { defaultSenderName: 'HERALD' });
    transports = [0, 1].map(() =>
      smppTransport(settings, {
        database,
        clock,
        metrics: new Registry(),
        redisUrl: REDIS_URL,
        rateKeyPrefix: prefix,
        receiveInbound,
      }),
    );
    const submit = (transport: SmsTransport, messages: OutgoingSms[], urgent = false) =>
      transport.submit(messages, new AbortController().signal, { urgent });
    const started = performance.now();
    const campaigns = Promise.all(
      transports.map((transport) =>
        submit(
          transport,
          Array.from({ length: 100 }, () => message('campaign')),
        ),
      ),
    );
    // Both campaigns under way, most of them still waiting for the rate.
    await waitFor('the campaigns at the SMSC', async () => (smsc.received().length >= 40 ? true : undefined));
    const passcodesStarted = performance.now();
    const passcodes = await Promise.all(
      transports.map((transport) =>
        submit(
          transport,
          Array.from({ length: 5 }, () => message('code 1234')),
          true,
        ),
      ),
    );
    const passcodesMs = performance.now() - passcodesStarted;
    const results = (await campaigns).flat();
    const campaignsMs = performance.now() - started;

    assert.ok([...results, ...passcodes.flat()].every((result) => result.accepted));
    // Never beyond the contract: the SMSC throttled nothing.
    assert.equal(smsc.stats().submits.throttled, 0);
    assert.equal(smsc.stats().submits.accepted, 210);
    // 200 at 50 a second take 4 s, less what the buckets lend at the start (a tenth of a second's
    // worth); the processes each on their own would have taken 2 s.
    assert.ok(campaignsMs > 3500, `the campaigns took ${campaignsMs} ms`);
    // Any one second at the SMSC: 50 campaign submits, plus the tenth of a second the Redis
    // bucket lends, plus a lease's tenth of a second, plus up to two tenths between a token taken
    // and its submit_sm read by the simulator on this shared machine: 70. (Measured: 53 to 55;
    // the processes each on their own rate: about 100.)
    const arrivals = smsc
      .received()
      .filter((m) => m.text === 'campaign')
      .map((m) => Date.parse(m.parts[0].receivedAt));
    assert.ok(busiestSecond(arrivals) <= 70, `${busiestSecond(arrivals)} campaign submits in one second`);
    // 10 passcodes at 50 a second of their own, whatever the campaigns do: 100-130 ms on SQLite, 400-780
    // on PostgreSQL on a loaded machine. Behind the campaigns (160 more at 50 a second) they take over 3 s.
    assert.ok(passcodesMs < 2000, `the passcodes took ${passcodesMs} ms`);
  });
});
