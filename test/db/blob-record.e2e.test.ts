import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { recordUploadedAsset } from '#libs/assets';
import { TestStack } from '../support/stack.js';

// An asset's `created_new` says whether its bytes were new to the account. Records take the blob's
// lock in their one statement (lockedBlobRow); the question must be asked after the lock, or two
// records of the same new bytes that waited for it together would both say new.
describe('recording an asset under the blob lock', () => {
  const stack = new TestStack('local');

  beforeAll(() => stack.open());
  afterAll(() => stack.close());

  const waitingOnLocks = async (db: pg.Client, n: number) => {
    for (let i = 0; i < 200; i++) {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`);
      if (rows[0].n >= n) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`fewer than ${n} statements waiting on the lock`);
  };

  it('says new for the first of two records of the same new bytes that waited on the lock together, and only for it', async () => {
    const account = await stack.account({ name: `blob-record-${Math.random()}` });
    const hash = randomBytes(32).toString('hex');
    const stored = { hash, sizeBytes: 3, storageKey: hash, created: true };
    // A deletion of the same bytes holds the lock while both records start.
    const holder = new pg.Client({ connectionString: stack.databaseUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [hash]);
      const records = [1, 2].map((n) => recordUploadedAsset(stack.db, stored, { accountId: account.id, filePath: `copy-${n}.bin`, contentType: 'application/octet-stream' }));
      await waitingOnLocks(holder, 2);
      await holder.query('COMMIT');
      const assets = await Promise.all(records);
      expect(assets.map((a) => a.createdNew).sort()).toEqual([false, true]);
    } finally {
      await holder.end();
    }
    // Bytes the account already holds are not new to it.
    const third = await recordUploadedAsset(stack.db, stored, { accountId: account.id, filePath: 'copy-3.bin', contentType: 'application/octet-stream' });
    expect(third.createdNew).toBe(false);
    expect(await stack.db.blob.count({ where: { hash } })).toBe(1);
  });

  it('says new to another account, and records the blob row anew once a deletion removed it', async () => {
    const [a, b] = await Promise.all([stack.account({ name: `blob-a-${Math.random()}` }), stack.account({ name: `blob-b-${Math.random()}` })]);
    const hash = randomBytes(32).toString('hex');
    const stored = { hash, sizeBytes: 3, storageKey: hash, created: true };
    const meta = { filePath: 'x.bin', contentType: 'application/octet-stream' };
    expect((await recordUploadedAsset(stack.db, stored, { accountId: a.id, ...meta })).createdNew).toBe(true);
    expect((await recordUploadedAsset(stack.db, stored, { accountId: b.id, ...meta })).createdNew).toBe(true);
    await stack.db.asset.deleteMany({ where: { blobHash: hash } });
    await stack.db.blob.delete({ where: { hash } });
    expect((await recordUploadedAsset(stack.db, stored, { accountId: a.id, ...meta })).createdNew).toBe(true);
    expect(await stack.db.blob.count({ where: { hash } })).toBe(1);
  });
});
