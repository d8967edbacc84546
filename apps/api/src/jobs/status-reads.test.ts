import type { Db } from '#libs/db';
import { JobStatusReads, type JobStatusRow } from './status-reads.js';

/** A database whose job lookups answer when the test says so, and which records every query. */
function fakeDb(rows: JobStatusRow[]) {
  const queries: string[][] = [];
  const pending: Array<() => void> = [];
  let failNext = false;
  const db = {
    job: {
      findMany: ({ where }: { where: { id: { in: string[] } } }) => {
        queries.push(where.id.in);
        const fail = failNext;
        failNext = false;
        return new Promise((resolve, reject) => pending.push(() => (fail ? reject(new Error('database away')) : resolve(rows.filter((r) => where.id.in.includes(r.id))))));
      },
    },
  };
  /** Answers the next query, once it has been sent. */
  const answer = async () => {
    while (pending.length === 0) await new Promise((r) => setTimeout(r, 1));
    pending.shift()!();
    await new Promise((r) => setImmediate(r));
  };
  return { db: db as unknown as Db, queries, answer, failNextQuery: () => (failNext = true) };
}

const row = (id: string, status = 'queued'): JobStatusRow => ({ id, status, createdAt: new Date(0) });

describe('JobStatusReads', () => {
  it('reads the jobs of the streams that ask meanwhile in one query, once per job', async () => {
    const { db, queries, answer } = fakeDb([row('a'), row('b', 'running'), row('c')]);
    const reads = new JobStatusReads(db);
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
    const { db, queries, answer } = fakeDb([row('a'), row('b')]);
    const reads = new JobStatusReads(db);
    const a = reads.read('a');
    // A turn of the event loop later: always before the gathering timer can fire.
    await new Promise((r) => setImmediate(r));
    const b = reads.read('b');
    await answer();
    expect([await a, await b]).toEqual([row('a'), row('b')]);
    expect(queries).toEqual([['a', 'b']]);
  });

  it('passes a failed query on to its readers only, and keeps reading afterwards', async () => {
    const { db, queries, answer, failNextQuery } = fakeDb([row('a')]);
    const reads = new JobStatusReads(db);
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
    const { db, queries, answer } = fakeDb(ids.map((id) => row(id)));
    const reads = new JobStatusReads(db);
    const all = ids.map((id) => reads.read(id));
    for (let i = 0; i < 3; i++) await answer();
    expect((await Promise.all(all)).every((r, i) => r?.id === ids[i])).toBe(true);
    expect(queries.map((q) => q.length)).toEqual([1_000, 1_000, 500]);
  });
});
