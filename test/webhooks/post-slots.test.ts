import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { PostSlots, type PostSlot } from '../../src/webhooks/post-slots.ts';

// In memory only: no storage.
describe('webhook post slots', () => {
  const signal = new AbortController().signal;

  it('forgets the hosts and accounts it no longer needs, those its account turned away included', async () => {
    const clock = new ManualClock();
    const slots = new PostSlots(clock);
    const posting: PostSlot[] = [];
    for (let i = 0; i < 8; i++) posting.push((await slots.take('a', `h${i}.test`, 1_000, signal)) as PostSlot);
    const comeBackAt: number[] = [];
    for (let i = 0; i < 100; i++) comeBackAt.push((await slots.take('a', `other${i}.test`, 1_000, signal)) as number);
    assert.ok(
      comeBackAt.every((at) => Number.isInteger(at) && at > clock.now()),
      'each turned away, to come back',
    );
    assert.equal(slots.lanes, 9, 'the eight hosts posting and their account');

    for (const slot of posting) slot.give();
    assert.equal(slots.lanes, 1, 'the account, until those it turned away are due');
    clock.set(Math.max(...comeBackAt));
    const last = (await slots.take('a', 'other0.test', 1_000, signal)) as PostSlot;
    last.give();
    assert.equal(slots.lanes, 0);
  });

  it('sends the first deliveries turned away after a long backlog cleared back within a second', async () => {
    const clock = new ManualClock();
    const slots = new PostSlots(clock);
    const hold = () => slots.take('a', 'h.test', 600_000, signal);
    const posting = (await Promise.all([1, 2, 3, 4].map(hold))) as PostSlot[];
    const waiting = [1, 2, 3, 4].map(hold);
    // A hanging host's backlog, turned away round after round: 20,000 times 25 ms is past the 5 min bound.
    for (let i = 0; i < 20_000; i++) await slots.take(`b${i % 50}`, 'h.test', 600_000, signal);
    for (const slot of posting) slot.give();
    for (const slot of (await Promise.all(waiting)) as PostSlot[]) slot.give();

    clock.advance(6 * 60_000);
    const burst = (await Promise.all([1, 2, 3, 4].map(hold))) as PostSlot[];
    const queued = [1, 2, 3, 4].map(hold);
    const ninth = (await hold()) as number;
    assert.ok(ninth - clock.now() < 1_000, `comes back in ${ninth - clock.now()} ms`);
    for (const slot of burst) slot.give();
    for (const slot of (await Promise.all(queued)) as PostSlot[]) slot.give();
  });

  it('hands a post that ends to the delivery waiting for its host, ahead of one that comes after', async () => {
    const clock = new ManualClock();
    const slots = new PostSlots(clock);
    const posting = await Promise.all([1, 2, 3, 4].map(() => slots.take('a', 'h.test', 1_000, signal)));
    const waiting = slots.take('b', 'h.test', 1_000, signal);
    (posting[0] as PostSlot).give();
    const newcomer = await slots.take('c', 'h.test', 50, signal);
    assert.equal(typeof newcomer, 'number', 'the newcomer waited its bound and was turned away');
    assert.equal(typeof (await waiting), 'object', 'the waiting delivery took the post that ended');
  });
});
