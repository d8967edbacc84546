import type { Job } from '#libs/db';
import { InsertBatcher, MAX_IN_FLIGHT, type InsertResult, type NewJobRow } from './insert-batcher.js';
import { JobStore } from './job-store.js';

/** A store whose statements end when the test says so, and which records every one it was sent. */
function fakeStore() {
  const statements: string[][] = [];
  const pending: Array<{ ids: string[]; end: (fail?: boolean) => void }> = [];
  const insertMany = (rows: NewJobRow[]): Promise<InsertResult[]> => {
    const ids = rows.map((r) => r.id);
    statements.push(ids);
    return new Promise((resolve, reject) =>
      pending.push({
        ids,
        end: (fail = false) =>
          fail
            ? reject(new Error('could not serialize'))
            : resolve(rows.map((r) => (r.id.startsWith('full') ? { kind: 'queue_full' } : { kind: 'created', job: { id: r.id, accountId: r.accountId } as Job }))),
      }),
    );
  };
  /** Ends the oldest statement still running. */
  const end = async (fail = false) => {
    while (pending.length === 0) await turn();
    pending.shift()!.end(fail);
    // Its rows answered, and the next statement on its way.
    for (let i = 0; i < 5; i++) await turn();
  };
  // A JobStore by its prototype (the batcher takes a store as it is, a Db it wraps in one).
  const store = Object.assign(Object.create(JobStore.prototype) as JobStore, { insertMany });
  return { store, statements, running: () => pending.length, end };
}

const turn = () => new Promise((r) => setImmediate(r));
const later = new Date(Date.now() + 60_000);
const row = (id: string): NewJobRow => ({
  id,
  accountId: 'acct',
  workflow: {},
  outputNodes: [],
  source: 'v2',
  clientId: null,
  deploymentId: null,
  expiresAt: later,
  queueDeadlineAt: later,
  idempotencyKey: null,
  requestHash: null,
  idempotencyExpiresAt: later,
  maxQueued: 100,
});

describe('InsertBatcher', () => {
  it('inserts the rows of one turn together, at most MAX_IN_FLIGHT statements at once, and the rows that wait go in one', async () => {
    const { store, statements, running, end } = fakeStore();
    const created: string[][] = [];
    const batcher = new InsertBatcher(store, (jobs) => created.push(jobs.map((j) => j.id)));
    const answers = [batcher.insert(row('a')), batcher.insert(row('b'))];
    await turn();
    const alone = Array.from({ length: MAX_IN_FLIGHT - 1 }, (_, i) => `c${i}`);
    for (const id of alone) {
      answers.push(batcher.insert(row(id)));
      await turn();
    }
    // The limit runs; what comes meanwhile waits for one of them to end.
    for (const id of ['d', 'e', 'full-f']) answers.push(batcher.insert(row(id)));
    await turn();
    await turn();
    expect(statements).toEqual([['a', 'b'], ...alone.map((id) => [id])]);
    expect(running()).toBe(MAX_IN_FLIGHT);
    await end();
    expect(statements).toEqual([['a', 'b'], ...alone.map((id) => [id]), ['d', 'e', 'full-f']]);
    for (let i = 0; i < MAX_IN_FLIGHT; i++) await end();
    const results = await Promise.all(answers);
    expect(results.map((r) => r.kind)).toEqual([...Array(2 + alone.length + 2).fill('created'), 'queue_full']);
    expect(results.map((r) => (r.kind === 'created' ? r.job.id : null))).toEqual(['a', 'b', ...alone, 'd', 'e', null]);
    // The jobs each statement created, once per statement, before their submissions go on.
    expect(created).toEqual([['a', 'b'], ...alone.map((id) => [id]), ['d', 'e']]);
  });

  it('retries a statement that failed as a whole row by row, and fails a lone row', async () => {
    const { store, statements, end } = fakeStore();
    const created: string[][] = [];
    const batcher = new InsertBatcher(store, (jobs) => created.push(jobs.map((j) => j.id)));
    const answers = Promise.allSettled([batcher.insert(row('a')), batcher.insert(row('b'))]);
    await end(true);
    await end();
    await end(true);
    const [a, b] = await answers;
    expect(statements).toEqual([['a', 'b'], ['a'], ['b']]);
    expect(a).toMatchObject({ status: 'fulfilled', value: { kind: 'created' } });
    expect(b).toMatchObject({ status: 'rejected', reason: { message: 'could not serialize' } });
    expect(created).toEqual([['a']]);
  });

  it('answers the rows even when what follows their creation throws', async () => {
    const { store, end } = fakeStore();
    const batcher = new InsertBatcher(store, () => {
      throw new Error('redis away');
    });
    const answer = batcher.insert(row('a'));
    await end();
    expect(await answer).toMatchObject({ kind: 'created' });
  });
});
