import { BatchedReads } from './batched-reads.js';

interface Row {
  id: string;
  status: string;
  createdAt: Date;
}

/** A store whose reads answer when the test says so, and which records every query. */
function fakeStore(rows: Row[]) {
  const queries: string[][] = [];
  const pending: Array<() => void> = [];
  let failNext = false;
  const readAll = (ids: string[]): Promise<Map<string, Row>> => {
    queries.push(ids);
    const fail = failNext;
    failNext = false;
    return new Promise((resolve, reject) =>
      pending.push(() => (fail ? reject(new Error('database away')) : resolve(new Map(rows.filter((r) => ids.includes(r.id)).map((r) => [r.id, r]))))),
    );
  };
  /** Answers the next query, once it has been sent. */
  const answer = async () => {
    while (pending.length === 0) await new Promise((r) => setTimeout(r, 1));
    pending.shift()!();
    await new Promise((r) => setImmediate(r));
  };
  return { readAll, queries, answer, failNextQuery: () => (failNext = true) };
}

const row = (id: string, status = 'queued'): Row => ({ id, status, createdAt: new Date(0) });
// As the event streams' status reads are set up in createJobSystem.
const statusReads = (readAll: (ids: string[]) => Promise<Map<string, Row>>) => new BatchedReads(readAll, { gatherMs: 10, maxIds: 1_000 });

describe('BatchedReads', () => {
  it('reads the jobs of the streams that ask meanwhile in one query, once per job', async () => {
    const { readAll, queries, answer } = fakeStore([row('a'), row('b', 'running'), row('c')]);
    const reads = statusReads(readAll);
    const first = reads.read('a');
    while (queries.length === 0) await new Promise((r) => setTimeout(r, 1));
    // While the first query runs, 300 streams of three jobs (one unknown) ask.
    const later = Array.from({ length: 300 }, (_, i) => reads.read(['a', 'b', 'gone'][i % 3]!));
    await answer();
    expect(await first).toEqual(row('a'));
    await answer();
    const results = await Promise.all(later);
    expect(queries).toEqual([['a'], ['a', 'b', 'gone']]);
    expect(results.filter((r) => r?.id === 'b' && r.status === 'running')).toHaveLength(100);
    expect(results.filter((r) => r === null)).toHaveLength(100);
  });

  it('reads the jobs asked for within a few ms of each other in one query', async () => {
    const { readAll, queries, answer } = fakeStore([row('a'), row('b')]);
    const reads = statusReads(readAll);
    const a = reads.read('a');
    // A turn of the event loop later: always before the gathering timer can fire.
    await new Promise((r) => setImmediate(r));
    const b = reads.read('b');
    await answer();
    expect([await a, await b]).toEqual([row('a'), row('b')]);
    expect(queries).toEqual([['a', 'b']]);
  });

  it('passes a failed query on to its readers only, and keeps reading afterwards', async () => {
    const { readAll, queries, answer, failNextQuery } = fakeStore([row('a')]);
    const reads = statusReads(readAll);
    failNextQuery();
    const failed = reads.read('a');
    while (queries.length === 0) await new Promise((r) => setTimeout(r, 1));
    const next = reads.read('a');
    await answer();
    await expect(failed).rejects.toThrow('database away');
    await answer();
    expect(await next).toEqual(row('a'));
    expect(queries).toHaveLength(2);
  });

  it('splits a very large wait into queries of at most 1,000 ids', async () => {
    const ids = Array.from({ length: 2_500 }, (_, i) => `job-${i}`);
    const { readAll, queries, answer } = fakeStore(ids.map((id) => row(id)));
    const reads = statusReads(readAll);
    const all = ids.map((id) => reads.read(id));
    for (let i = 0; i < 3; i++) await answer();
    expect((await Promise.all(all)).every((r, i) => r?.id === ids[i])).toBe(true);
    expect(queries.map((q) => q.length)).toEqual([1_000, 1_000, 500]);
  });

  it('without a gathering delay, reads the ids of one turn of the event loop in one query (fresh queue positions)', async () => {
    const { readAll, queries, answer } = fakeStore([row('a'), row('b'), row('c')]);
    const reads = new BatchedReads(readAll);
    const all = ['a', 'b', 'c', 'a'].map((id) => reads.read(id));
    await answer();
    expect((await Promise.all(all)).map((r) => r?.id)).toEqual(['a', 'b', 'c', 'a']);
    expect(queries).toEqual([['a', 'b', 'c']]);
  });
});
