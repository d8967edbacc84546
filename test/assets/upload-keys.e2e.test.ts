import { randomBytes, randomUUID } from 'node:crypto';
import { startCloud, type Cloud } from '../support/cloud.js';
import { bearer, call, envelopeCode, uploadForm } from '../support/http.js';
import { TestStack } from '../support/stack.js';

// Idempotency-Key on asset uploads, by the public v2 rule for keys: single-use for 24 hours, taken
// only by an upload that was recorded, any later use refused before its body is stored.
describe('asset uploads with an Idempotency-Key', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let alice: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack);
    alice = await stack.account({ name: 'alice' });
  }, 60_000);
  afterAll(() => stack.close());

  const upload = (bytes: Uint8Array, key: string, fields: Record<string, string> = {}) =>
    call(`${cloud.api.url}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key, { 'idempotency-key': key }), body: uploadForm(bytes, 'in.png', fields) });
  const assetCount = () => stack.db.asset.count({ where: { accountId: alice.id } });

  it('a key is single-use: a later upload with it is refused, naming the asset, and stores nothing', async () => {
    const key = randomUUID();
    const first = await upload(randomBytes(300), key);
    expect(first.status).toBe(201);
    const before = await assetCount();
    for (const bytes of [randomBytes(300), randomBytes(10)]) {
      const again = await upload(bytes, key);
      expect(again.status).toBe(422);
      expect(envelopeCode(again)).toBe('idempotency_key_reuse');
      expect(again.body.error.details).toEqual({ asset_id: first.body.id });
    }
    expect(await assetCount()).toBe(before);
  });

  it('an upload that failed leaves its key free', async () => {
    const key = randomUUID();
    const refused = await upload(randomBytes(100), key, { expected_hash: `blake3:${'0'.repeat(64)}` });
    expect(refused.status).toBe(409);
    expect(envelopeCode(refused)).toBe('hash_mismatch');
    expect((await upload(randomBytes(100), key)).status).toBe(201);
  });

  it('concurrent uploads with one key record exactly one asset', async () => {
    const key = randomUUID();
    const before = await assetCount();
    const results = await Promise.all(Array.from({ length: 8 }, () => upload(randomBytes(2000), key)));
    const made = results.filter((r) => r.status === 201);
    expect(made).toHaveLength(1);
    const refused = results.filter((r) => r.status === 422);
    expect(refused).toHaveLength(7);
    for (const r of refused) expect(r.body.error.details.asset_id).toBe(made[0]!.body.id);
    expect(await assetCount()).toBe(before + 1);
  });

  it('keys are per account, and a malformed key is a 400', async () => {
    const key = randomUUID();
    expect((await upload(randomBytes(50), key)).status).toBe(201);
    const bob = await stack.account({ name: 'bob' });
    const theirs = await call(`${cloud.api.url}/api/v2/assets`, { method: 'POST', headers: bearer(bob.key, { 'idempotency-key': key }), body: uploadForm(randomBytes(50), 'b.png') });
    expect(theirs.status).toBe(201);
    const bad = await upload(randomBytes(50), 'x'.repeat(300));
    expect(bad.status).toBe(400);
  });
});
