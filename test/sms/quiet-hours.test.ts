import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';

// Quiet hours (ARCHITECTURE.md, "Preflight"): PATCH /account {quietHours}, and a batch SMS held
// until the window ends in its recipient's zone.

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect);
    alice = await api.client();
  });
  afterEach(() => api.close());

  const patch = (client: ApiClient, payload: object) =>
    api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { authorization: `Bearer ${client.token}` },
      payload,
    });

  it('keeps quiet hours off until set, shows them in GET /account, and turns them off with null', async () => {
    assert.equal((await alice.get('/account')).json().quietHours, null);
    const set = await patch(alice, { quietHours: { start: '21:00', end: '08:00' } });
    assert.equal(set.statusCode, 200, set.body);
    assert.deepEqual(set.json().quietHours, { start: '21:00', end: '08:00' });
    assert.deepEqual((await alice.get('/account')).json().quietHours, { start: '21:00', end: '08:00' });
    assert.deepEqual((await patch(alice, { smartEncoding: false })).json().quietHours, {
      start: '21:00',
      end: '08:00',
    });
    assert.deepEqual((await patch(alice, { quietHours: { start: '12:00', end: '14:00' } })).json().quietHours, {
      start: '12:00',
      end: '14:00',
    });
    assert.equal((await patch(alice, { quietHours: null })).json().quietHours, null);
    assert.equal((await alice.get('/account')).json().quietHours, null);
  });

  it('refuses quiet hours that are no window of the day with 400, and keeps the ones set', async () => {
    await patch(alice, { quietHours: { start: '21:00', end: '08:00' } });
    const refused: unknown[] = [
      { start: '21:00' },
      { start: '21:00', end: '21:00' },
      { start: '24:00', end: '08:00' },
      { start: '9:00', end: '17:00' },
      { start: '21:00', end: '08:60' },
      { start: '21:00:00', end: '08:00' },
      { start: 2100, end: 800 },
      { start: '21:00', end: '08:00', days: 'weekdays' },
      'nightly',
    ];
    for (const quietHours of refused) {
      const answer = await patch(alice, { quietHours });
      assert.equal(answer.statusCode, 400, `${JSON.stringify(quietHours)}: ${answer.body}`);
    }
    const same = (await patch(alice, { quietHours: { start: '21:00', end: '21:00' } })).json();
    assert.deepEqual(
      same.errors.map((e: { field: string }) => e.field),
      ['quietHours.end'],
    );
    assert.deepEqual((await alice.get('/account')).json().quietHours, { start: '21:00', end: '08:00' });
  });
});
