import { dropEmptyCounts, queuePositions, queuePositionsOf } from '#libs/jobs';
import { Prisma } from '#libs/db';
import { TestStack } from '../support/stack.js';

// The API answers queue_position from a periodic full ranking, and counts jobs newer than that
// ranking on their own. Both must give every waiting job the same place, or a client polling
// one job sees it jump, and one page of jobs shows a newer job ahead of an older one.
describe('queue positions', () => {
  const stack = new TestStack('local');

  beforeAll(() => stack.open());
  afterAll(() => stack.close());

  it('agree between the full ranking and the count of chosen jobs, handed-over jobs included', async () => {
    const accounts = await Promise.all(['a', 'b', 'c'].map((name) => stack.account({ name })));
    const base = Date.now() - 60_000;
    let n = 0;
    const job = (accountId: string, extra: Record<string, unknown> = {}) => ({
      accountId,
      workflow: {},
      createdAt: new Date(base + n++ * 10),
      expiresAt: new Date(base + 3_600_000),
      ...extra,
    });
    const rows = [
      // a: one running, two handed to a worker but not started, five waiting.
      job(accounts[0]!.id, { status: 'running', startedAt: new Date(base) }),
      job(accounts[0]!.id, { dispatchedAt: new Date(base + 5_000) }),
      job(accounts[0]!.id, { dispatchedAt: new Date(base + 4_000) }),
      ...Array.from({ length: 5 }, () => job(accounts[0]!.id)),
      // b: three waiting, one handed over; served before a.
      job(accounts[1]!.id, { dispatchedAt: new Date(base + 6_000) }),
      ...Array.from({ length: 3 }, () => job(accounts[1]!.id)),
      // c: a late single job, never served.
      job(accounts[2]!.id),
    ];
    await stack.db.job.createMany({ data: rows });
    await stack.db.account.update({ where: { id: accounts[0]!.id }, data: { lastDispatchedAt: new Date(base + 5_000) } });
    await stack.db.account.update({ where: { id: accounts[1]!.id }, data: { lastDispatchedAt: new Date(base + 6_000) } });

    const queued = await stack.db.job.findMany({ where: { status: 'queued' }, select: { id: true, dispatchedAt: true } });
    expect(queued).toHaveLength(rows.length - 1);
    const ranking = await queuePositions(stack.db);
    const counted = await queuePositionsOf(
      stack.db,
      queued.map((j) => j.id),
    );
    expect(Object.fromEntries(counted)).toEqual(Object.fromEntries(ranking));
    // Positions are 0..n-1, handed-over jobs first, in the order they were handed over.
    expect([...ranking.values()].sort((x, y) => x - y)).toEqual(queued.map((_, i) => i));
    const handed = queued.filter((j) => j.dispatchedAt).sort((x, y) => x.dispatchedAt!.getTime() - y.dispatchedAt!.getTime());
    expect(handed.map((j) => ranking.get(j.id))).toEqual([0, 1, 2]);
    // Each job counted alone gets the same place as counted with the others.
    for (const { id } of queued) expect((await queuePositionsOf(stack.db, [id])).get(id)).toBe(ranking.get(id));
  });

  it('agree on random queues: many accounts, backlogs, handed-out and running jobs, ties', async () => {
    // A small deterministic generator, so a failure can be replayed.
    let seed = 20261122;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const accounts = await Promise.all(Array.from({ length: 6 }, (_, i) => stack.account({ name: `r${i}` })));
    for (let round = 0; round < 8; round++) {
      await stack.db.job.deleteMany({});
      const base = Date.now() - 600_000;
      const rows: { accountId: string; workflow: object; createdAt: Date; expiresAt: Date; status?: 'running'; startedAt?: Date; dispatchedAt?: Date }[] = [];
      let t = 0;
      for (const account of accounts) {
        const waiting = [0, 1, 2, 3, 7, 40][random(6)]!;
        const handed = random(3);
        const running = random(3);
        const job = (extra: { status?: 'running'; startedAt?: Date; dispatchedAt?: Date }) => ({ accountId: account.id, workflow: {}, createdAt: new Date(base + (t += 1 + random(3)) * 10), expiresAt: new Date(base + 3_600_000), ...extra });
        for (let i = 0; i < running; i++) rows.push(job({ status: 'running', startedAt: new Date(base) }));
        for (let i = 0; i < handed; i++) rows.push(job({ dispatchedAt: new Date(base + 1_000 + random(5) * 1_000) }));
        for (let i = 0; i < waiting; i++) rows.push(job({}));
        // Equal last-served times happen when one pass serves several accounts.
        const served = random(4);
        await stack.db.account.update({ where: { id: account.id }, data: { lastDispatchedAt: served === 0 ? null : new Date(base + served * 1_000) } });
      }
      await stack.db.job.createMany({ data: rows });
      const queued = await stack.db.job.findMany({ where: { status: 'queued' }, select: { id: true } });
      const ranking = await queuePositions(stack.db);
      const counted = await queuePositionsOf(
        stack.db,
        queued.map((j) => j.id),
      );
      expect(Object.fromEntries(counted)).toEqual(Object.fromEntries(ranking));
    }
  });

  // Positions and the queue limit read job_queue_counts, the jobs_total gauge job_status_counts;
  // triggers on jobs keep both. Whatever changes the jobs (one statement or many at once, across
  // accounts), the counts must stay equal to counting the jobs themselves. A row that reaches zero
  // stays, for the account's next job to update, until the sweeper drops it.
  describe('job_queue_counts and job_status_counts', () => {
    const recount = () =>
      stack.db.$queryRaw<{ account_id: string; waiting: number; handed: number; running: number }[]>`
        SELECT account_id,
               count(*) FILTER (WHERE status = 'queued' AND dispatched_at IS NULL)::int AS waiting,
               count(*) FILTER (WHERE status = 'queued' AND dispatched_at IS NOT NULL)::int AS handed,
               count(*) FILTER (WHERE status IN ('running', 'canceling'))::int AS running
        FROM jobs GROUP BY account_id
        HAVING count(*) FILTER (WHERE status IN ('queued', 'running', 'canceling')) > 0
        ORDER BY account_id`;
    const counts = () =>
      stack.db.$queryRaw<{ account_id: string; waiting: number; handed: number; running: number }[]>`
        SELECT account_id, waiting, handed, running FROM job_queue_counts
        WHERE waiting <> 0 OR handed <> 0 OR running <> 0 ORDER BY account_id`;
    const statusRecount = () =>
      stack.db.$queryRaw<{ account_id: string; status: string; n: number }[]>`
        SELECT account_id, status::text, count(*)::int AS n FROM jobs GROUP BY account_id, status ORDER BY account_id, status`;
    const statusCounts = () =>
      stack.db.$queryRaw<{ account_id: string; status: string; n: number }[]>`
        SELECT account_id, status::text, n FROM job_status_counts WHERE n <> 0 ORDER BY account_id, status`;
    const zeroRows = async () =>
      (await stack.db.$queryRaw<{ n: number }[]>`
        SELECT ((SELECT count(*) FROM job_queue_counts WHERE waiting = 0 AND handed = 0 AND running = 0)
              + (SELECT count(*) FROM job_status_counts WHERE n = 0))::int AS n`)[0]!.n;
    const expectExact = async () => {
      expect(await counts()).toEqual(await recount());
      expect(await statusCounts()).toEqual(await statusRecount());
    };
    const newJobs = (accountId: string, n: number) =>
      Array.from({ length: n }, () => ({ accountId, workflow: {}, expiresAt: new Date(Date.now() + 3_600_000) }));

    it('follow every kind of change to the jobs', async () => {
      await stack.db.job.deleteMany({});
      const [a, b] = await Promise.all(['qa', 'qb'].map((name) => stack.account({ name })));
      await stack.db.job.createMany({ data: [...newJobs(a!.id, 6), ...newJobs(b!.id, 4)] });
      await expectExact();
      // Handed out, across both accounts in one statement; then started; then finished.
      await stack.db.$executeRaw`UPDATE jobs SET dispatched_at = now() WHERE id IN (SELECT id FROM jobs ORDER BY created_at, id LIMIT 5)`;
      await expectExact();
      await stack.db.job.updateMany({ where: { dispatchedAt: { not: null }, accountId: a!.id }, data: { status: 'running' } });
      await expectExact();
      await stack.db.job.updateMany({ where: { status: 'running' }, data: { status: 'canceling' } });
      await stack.db.job.updateMany({ where: { status: 'canceling' }, data: { status: 'succeeded' } });
      await expectExact();
      // Handed back (a worker lost), canceled while waiting, a change that moves nothing.
      await stack.db.job.updateMany({ where: { accountId: b!.id, dispatchedAt: { not: null } }, data: { dispatchedAt: null } });
      const [first] = await stack.db.job.findMany({ where: { accountId: b!.id }, take: 1 });
      await stack.db.job.update({ where: { id: first!.id }, data: { status: 'canceled' } });
      await stack.db.job.updateMany({ where: { accountId: a!.id }, data: { progress: { value: 1 } } });
      await expectExact();
      // Deleted one by one, by the account's deletion (a cascade), and all at once.
      await stack.db.job.deleteMany({ where: { accountId: a!.id, status: 'queued' } });
      await expectExact();
      await stack.db.account.delete({ where: { id: b!.id } });
      await expectExact();
      await stack.db.job.createMany({ data: newJobs(a!.id, 3) });
      await stack.db.$executeRawUnsafe('TRUNCATE jobs CASCADE');
      expect(await counts()).toEqual([]);
      expect(await statusCounts()).toEqual([]);
      await expectExact();
    });

    it('stay exact under concurrent statements across accounts, without deadlocks', async () => {
      await stack.db.job.deleteMany({});
      const accounts = await Promise.all(['c1', 'c2', 'c3'].map((name) => stack.account({ name })));
      await stack.db.job.createMany({ data: accounts.flatMap((acc) => newJobs(acc.id, 20)) });
      // Inserts, hand-outs, starts, finishes and deletes, each touching several accounts, at once.
      // Each takes its rows as the dispatcher and the claim do (skipping locked ones): rows taken in
      // random order and waited for could deadlock on the jobs themselves, which is not what is tested.
      const work = Array.from({ length: 40 }, (_, i) => {
        const acc = accounts[i % 3]!;
        switch (i % 5) {
          case 0:
            return stack.db.job.createMany({ data: [...newJobs(acc.id, 2), ...newJobs(accounts[(i + 1) % 3]!.id, 1)] });
          case 1:
            return stack.db.$executeRaw`UPDATE jobs SET dispatched_at = now() WHERE id IN (SELECT id FROM jobs WHERE status = 'queued' AND dispatched_at IS NULL ORDER BY random() LIMIT 4 FOR UPDATE SKIP LOCKED)`;
          case 2:
            return stack.db.$executeRaw`UPDATE jobs SET status = 'running' WHERE id IN (SELECT id FROM jobs WHERE status = 'queued' AND dispatched_at IS NOT NULL ORDER BY random() LIMIT 3 FOR UPDATE SKIP LOCKED)`;
          case 3:
            return stack.db.$executeRaw`UPDATE jobs SET status = 'succeeded' WHERE id IN (SELECT id FROM jobs WHERE status = 'running' ORDER BY random() LIMIT 3 FOR UPDATE SKIP LOCKED)`;
          default:
            return stack.db.$executeRaw`DELETE FROM jobs WHERE id IN (SELECT id FROM jobs ORDER BY random() LIMIT 2 FOR UPDATE SKIP LOCKED)`;
        }
      });
      const results = await Promise.allSettled(work);
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
      await expectExact();
      // Not vacuous: every stage was populated along the way.
      expect((await stack.db.job.count({ where: { status: 'succeeded' } })) > 0).toBe(true);
    });

    it('leave rows at zero to the sweeper, which drops them, skipping rows another transaction holds', async () => {
      const [idle, busy, done] = await Promise.all(['idle', 'busy', 'done'].map((name) => stack.account({ name })));
      // A job that ran to its end leaves its account's rows at zero, for its next job to update.
      await stack.db.job.createMany({ data: newJobs(done!.id, 1) });
      for (const set of [Prisma.sql`dispatched_at = now()`, Prisma.sql`status = 'running'`, Prisma.sql`status = 'succeeded'`]) {
        await stack.db.$executeRaw`UPDATE jobs SET ${set} WHERE account_id = ${done!.id}::uuid`;
      }
      const rowsOf = async (accountId: string) => ({
        queue: await stack.db.$queryRaw`SELECT waiting, handed, running FROM job_queue_counts WHERE account_id = ${accountId}::uuid`,
        status: await stack.db.$queryRaw`SELECT status::text, n FROM job_status_counts WHERE account_id = ${accountId}::uuid ORDER BY status`,
      });
      expect(await rowsOf(done!.id)).toEqual({
        queue: [{ waiting: 0, handed: 0, running: 0 }],
        status: [{ status: 'queued', n: 0 }, { status: 'running', n: 0 }, { status: 'succeeded', n: 1 }],
      });
      await expectExact();
      // As an insert batch that refused every job leaves them.
      await stack.db.$executeRaw`INSERT INTO job_queue_counts (account_id) VALUES (${idle!.id}::uuid), (${busy!.id}::uuid)`;
      // A batch of another replica holds busy's row: skipped, not waited for.
      let release!: () => void;
      let locked!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const holder = stack.db.$transaction(async (tx) => {
        await tx.$queryRaw`SELECT 1 FROM job_queue_counts WHERE account_id = ${busy!.id}::uuid FOR UPDATE`;
        locked();
        await held;
      });
      await isLocked;
      const atZero = await zeroRows();
      expect(atZero).toBeGreaterThanOrEqual(5);
      expect(await dropEmptyCounts(stack.db)).toBe(atZero - 1);
      release();
      await holder;
      expect(await dropEmptyCounts(stack.db)).toBe(1);
      expect(await zeroRows()).toBe(0);
      expect(await rowsOf(done!.id)).toEqual({ queue: [], status: [{ status: 'succeeded', n: 1 }] });
      await expectExact();
    });

    it('are rebuilt from the jobs by job_queue_counts_rebuild() and job_status_counts_rebuild()', async () => {
      const acc = await stack.account({ name: 'rebuilt' });
      await stack.db.job.createMany({ data: newJobs(acc.id, 3) });
      // As after a restore with triggers disabled: wrong counts and a row for no job.
      await stack.db.$executeRaw`UPDATE job_queue_counts SET waiting = waiting + 5`;
      await stack.db.$executeRaw`INSERT INTO job_queue_counts (account_id, waiting) VALUES (gen_random_uuid(), 2)`;
      expect(await counts()).not.toEqual(await recount());
      await stack.db.$executeRaw`SELECT job_queue_counts_rebuild()`;
      expect(await counts()).toEqual(await recount());
      // The same for the status counts, by their own function.
      await stack.db.$executeRaw`UPDATE job_status_counts SET n = n + 5`;
      await stack.db.$executeRaw`INSERT INTO job_status_counts (account_id, status, n) VALUES (gen_random_uuid(), 'failed', 2)`;
      expect(await statusCounts()).not.toEqual(await statusRecount());
      await stack.db.$executeRaw`SELECT job_status_counts_rebuild()`;
      await expectExact();
    });
  });
});
