import { queuePositions, queuePositionsOf } from '#libs/jobs';
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
});
