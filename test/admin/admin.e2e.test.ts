import { verifyRouterToken } from '#libs/auth';
import { writeFileSync } from 'node:fs';
import { bearer, call } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { TEST_ROUTER_SECRET, TestStack } from '../support/stack.js';

describe('admin command line', () => {
  const stack = new TestStack('local');
  let api: RunningProcess;

  beforeAll(async () => {
    await stack.open();
    api = await stack.startApi();
  });
  afterAll(() => stack.close());

  const admin = async (...args: string[]) => {
    const r = await stack.admin(args);
    if (r.code !== 0) throw new Error(`admin ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
    return JSON.parse(r.stdout) as Record<string, any>;
  };

  it('creates an account whose key works, then manages keys, credits and limits', async () => {
    const created = await admin('account', 'create', '--name', 'Acme', '--tier', 'pro', '--credits', '500');
    expect(created.account_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.api_key).toMatch(/^cck_/);
    expect(created.credits).toBe(500);
    // The key is stored only as a hash.
    const keys = await stack.db.apiKey.findMany({ where: { accountId: created.account_id } });
    expect(keys).toHaveLength(1);
    expect(keys[0]!.hash).not.toContain(created.api_key);
    expect(created.api_key.startsWith(keys[0]!.prefix)).toBe(true);
    expect(JSON.stringify(await stack.db.apiKey.findMany())).not.toContain(created.api_key);

    const probe = (key: string) => call(`${api.url}/api/v2/assets/00000000-0000-4000-8000-000000000000`, { headers: bearer(key) });
    expect((await probe(created.api_key)).status).toBe(404);

    const second = await admin('key', 'create', '--account', created.account_id, '--name', 'ci');
    expect((await probe(second.api_key)).status).toBe(404);
    expect(await admin('key', 'revoke', '--key', second.key_id)).toEqual({ revoked: 1 });
    // Revocation applies at once on every replica (the CLI tells them to drop cached lookups).
    expect((await probe(second.api_key)).status).toBe(401);
    expect((await probe(created.api_key)).status).toBe(404);
    expect(await admin('key', 'revoke', '--key', keys[0]!.prefix)).toEqual({ revoked: 1 });
    expect((await probe(created.api_key)).status).toBe(401);

    expect((await admin('credits', 'add', '--account', created.account_id, '--amount', '250')).credits).toBe(750);
    expect((await admin('credits', 'add', '--account', created.account_id, '--amount=-50')).credits).toBe(700);
    const ledger = await stack.db.creditLedgerEntry.findMany({ where: { accountId: created.account_id }, orderBy: { id: 'asc' } });
    expect(ledger.map((e) => Number(e.amount))).toEqual([500, 250, -50]);

    const set = await admin('account', 'set', '--account', created.account_id, '--tier', 'enterprise', '--max-queued-jobs', '7', '--status', 'inactive', '--router-enabled', 'true', '--router-entitlements', 'acme/*,other/model');
    expect(set.tier).toBe('enterprise');
    expect(set.status).toBe('inactive');
    expect(set.limits.max_queued_jobs).toBe(7);
    expect(set.limits.max_concurrent_jobs).toBe(10);
    expect(set.router).toMatchObject({ enabled: true, entitlements: ['acme/*', 'other/model'] });
    expect((await admin('account', 'show', '--account', created.account_id)).status).toBe('inactive');
  });

  it('mints router tokens for an account', async () => {
    const created = await admin('account', 'create', '--name', 'Router user');
    const minted = await admin('router', 'token', '--account', created.account_id, '--ttl', '600');
    expect(await verifyRouterToken(minted.token, { secret: TEST_ROUTER_SECRET, publicKeys: '' })).toBe(created.account_id);
    await expect(verifyRouterToken(minted.token, { secret: 'another-secret-entirely', publicKeys: '' })).rejects.toThrow();
  });

  it('manages deployments', async () => {
    const created = await admin('account', 'create', '--name', 'Deployer');
    const file = `/tmp/${stack.name}-wf.json`;
    writeFileSync(file, JSON.stringify({ '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } } }));
    expect(await admin('deployment', 'create', '--account', created.account_id, '--id', 'my-app', '--workflow', file)).toEqual({ id: 'my-app', status: 'starting' });
    expect(await admin('deployment', 'ready', '--id', 'my-app')).toEqual({ id: 'my-app', status: 'ready' });
    expect(await admin('deployment', 'stop', '--id', 'my-app')).toEqual({ id: 'my-app', status: 'stopped' });
  });

  it.each([
    [['account', 'create'], /--name is required/],
    [['account', 'create', '--name', 'x', '--tier', 'platinum'], /Unknown tier/],
    [['account', 'create', '--name', 'x', '--credits', 'lots'], /whole number/],
    [['credits', 'add', '--account', '00000000-0000-4000-8000-000000000000', '--amount', '1'], /no account/],
    [['key', 'revoke', '--key', 'cck_nothere'], /no active key/],
    [['account', 'set', '--account', 'nope'], /no account/],
    [['deployment', 'create', '--account', '00000000-0000-4000-8000-000000000000', '--id', 'Bad_Id', '--workflow', '/nonexistent'], /no account|DNS label/],
    [['nonsense'], /usage: npm run admin/],
    [['account', 'create', '--bogus'], /Unknown option/],
  ])('fails clearly on %j', async (args, message) => {
    const r = await stack.admin(args);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });

  it('stops with the name of a bad environment variable', async () => {
    const r = await stack.admin(['account', 'show', '--account', 'x'], { DATABASE_URL: 'nope' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/DATABASE_URL/);
  });
});
