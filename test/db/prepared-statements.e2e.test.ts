import { randomUUID } from 'node:crypto';
import { createPrismaClient, dropDatabase, ensureDatabase, executeStatement, PLAN_PER_CALL, Prisma, queryRows, statementNamer, type Db } from '#libs/db';
import { claimJob, finishJob, InsertBatcher, JobStore } from '#libs/jobs';
import { JobViews } from '../../apps/api/src/jobs/job-views.service.js';
import { databaseUrl, uniqueName } from '../support/env.js';
import { TestStack } from '../support/stack.js';

// Statements are prepared once per connection and run on PostgreSQL's cached plans; one that
// needs a plan per call opts out. Checked on a real server through pg_prepared_statements, which
// lists what the asking connection holds (the clients below have a single connection).
describe('prepared statements', () => {
  const url = databaseUrl(uniqueName('ccps'));
  const clients: Db[] = [];
  const client = (preparedStatements?: boolean) => {
    const db = createPrismaClient(url, 1, preparedStatements === undefined ? {} : { preparedStatements });
    clients.push(db);
    return db;
  };
  const prepared = async (db: Db) =>
    (await db.$queryRaw<{ statement: string }[]>`SELECT statement FROM pg_prepared_statements`).map((r) => r.statement);

  beforeAll(() => ensureDatabase(url));
  afterAll(async () => {
    await Promise.all(clients.map((db) => db.$disconnect()));
    await dropDatabase(url);
  });

  it('names each SQL text once, the same way every time, and stops naming past its bound', () => {
    const name = statementNamer(2);
    const a = name({ sql: 'SELECT 1' });
    expect(a).toMatch(/^p[\w-]{30}$/);
    expect(name({ sql: 'SELECT 1' })).toBe(a);
    expect(statementNamer(2)({ sql: 'SELECT 1' })).toBe(a);
    const b = name({ sql: 'SELECT 2' });
    expect(b).not.toBe(a);
    expect(name({ sql: 'SELECT 3' })).toBe('');
    expect(name({ sql: 'SELECT 2' })).toBe(b);
    expect(statementNamer()({ sql: `${PLAN_PER_CALL} SELECT 4` })).toBe('');
  });

  it('keeps a statement prepared on its connection and reuses it with new values', async () => {
    const db = client();
    for (const n of [1, 2, 3]) {
      expect(await db.$queryRaw<{ n: number }[]>`SELECT ${n}::int + 40 AS n`).toEqual([{ n: n + 40 }]);
    }
    const held = await prepared(db);
    expect(held.filter((s) => s.includes('+ 40 AS n'))).toHaveLength(1);
  });

  it('runs statements straight on the pool prepared the same way, with the rows read or the count written', async () => {
    const db = client();
    await db.$executeRaw`CREATE TABLE pool_marks (n int8 NOT NULL, at timestamptz NOT NULL)`;
    const at = new Date('2026-11-27T10:00:00.123Z');
    for (const n of [7n, 8n]) expect(await executeStatement(db, Prisma.sql`INSERT INTO pool_marks (n, at) SELECT ${n}, ${at} FROM generate_series(1, 2)`)).toBe(2);
    expect(await executeStatement(db, Prisma.sql`UPDATE pool_marks SET n = n + 1 WHERE n = ${8n}`)).toBe(2);
    // int8 as text (the caller converts), timestamps as Date.
    expect(await queryRows(db, Prisma.sql`SELECT n, at FROM pool_marks WHERE n > ${7n} ORDER BY n`)).toEqual([
      { n: '9', at },
      { n: '9', at },
    ]);
    const held = await prepared(db);
    expect(held.filter((s) => s.includes('INSERT INTO pool_marks'))).toHaveLength(1);
    expect(held.filter((s) => s.includes('UPDATE pool_marks'))).toHaveLength(1);
  });

  it('leaves a statement marked to be planned per call unprepared', async () => {
    const db = client();
    expect(await db.$queryRaw<{ n: number }[]>`${Prisma.raw(PLAN_PER_CALL)} SELECT ${2}::int + 50 AS n`).toEqual([{ n: 52 }]);
    expect((await prepared(db)).filter((s) => s.includes('+ 50 AS n'))).toHaveLength(0);
  });

  it('prepares nothing when turned off (DATABASE_PREPARED_STATEMENTS=false)', async () => {
    const db = client(false);
    expect(await db.$queryRaw<{ n: number }[]>`SELECT ${3}::int + 60 AS n`).toEqual([{ n: 63 }]);
    expect(await prepared(db)).toEqual([]);
  });
});

// A migration that adds a column must not break replicas still running the older code: a prepared
// statement that selects `*` from the changed table fails there ("cached plan must not change
// result type") until the replica restarts. The job statements therefore name their columns.
describe('prepared job statements across a migration', () => {
  const stack = new TestStack('local');
  let db: Db;

  beforeAll(async () => {
    await stack.open();
    // One connection: every statement below is prepared on the connection that sees the change.
    db = createPrismaClient(stack.databaseUrl, 1);
  });
  afterAll(async () => {
    await db.$disconnect();
    await stack.close();
  });

  it('insert, claim, finish and the job view keep working after jobs gains a column', async () => {
    const account = await stack.account();
    const batcher = new InsertBatcher(db);
    // find() reads the database only.
    const views = new JobViews(new JobStore(db), {} as never, {} as never, {} as never, db);
    const later = new Date(Date.now() + 3_600_000);
    const lifecycle = async () => {
      const id = randomUUID();
      const inserted = await batcher.insert({
        id,
        accountId: account.id,
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
        maxQueued: 1_000,
      });
      expect(inserted.kind).toBe('created');
      expect((await claimJob(db, id, { workerId: 'w1', enginePromptId: randomUUID(), executionTimeoutSeconds: 60 }))?.job.status).toBe('running');
      expect((await finishJob(db, id, { status: 'succeeded' }, 0))?.status).toBe('succeeded');
      const view = await views.find(account.id, id);
      expect(view).toMatchObject({ id, status: 'succeeded', workerId: 'w1' });
      return view;
    };
    // Past five runs PostgreSQL runs each on its cached plan.
    for (let i = 0; i < 6; i++) await lifecycle();
    await db.$executeRawUnsafe('ALTER TABLE jobs ADD COLUMN added_by_a_later_migration int');
    const after = await lifecycle();
    expect(after).not.toHaveProperty('addedByALaterMigration');
  });
});
