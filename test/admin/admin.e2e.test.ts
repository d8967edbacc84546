import { writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { verifyRouterToken } from '#libs/auth';
import { jobKeys, publishEngineReport } from '#libs/jobs';
import { bearer, call } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { TEST_ROUTER_SECRET, TestStack } from '../support/stack.js';

describe('admin command line', () => {
  const stack = new TestStack('local');
  let api: RunningProcess;

  beforeAll(async () => {
    await stack.open();
    api = await stack.startApi();
    // What a worker publishes once its engine is up, and submissions validate against.
    const redis = new Redis(stack.env().REDIS_URL!);
    try {
      await publishEngineReport(redis, jobKeys(stack.redisPrefix).nodeDefinitions, {
        EmptyImage: { input: { required: { width: ['INT', {}], height: ['INT', {}], batch_size: ['INT', {}], color: ['INT', {}] } }, output: ['IMAGE'] },
        SaveImage: { input: { required: { images: ['IMAGE'], filename_prefix: ['STRING', {}] } }, output: [], output_node: true },
      });
    } finally {
      redis.disconnect();
    }
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
    // Revoking again is safe: it succeeds and says the key was already revoked.
    expect(await admin('key', 'revoke', '--key', second.key_id)).toEqual({ revoked: 0, already_revoked: 1 });
    expect(await admin('key', 'revoke', '--key', keys[0]!.prefix)).toEqual({ revoked: 0, already_revoked: 1 });

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

  it('mints router tokens for an account, each with an exp within the maximum lifetime', async () => {
    const keys = { secret: TEST_ROUTER_SECRET, publicKeys: '', maxLifetimeSeconds: 30 * 24 * 3600 };
    const created = await admin('account', 'create', '--name', 'Router user');
    const minted = await admin('router', 'token', '--account', created.account_id, '--ttl', '600');
    expect(minted.expires_in).toBe(600);
    expect(await verifyRouterToken(minted.token, keys)).toBe(created.account_id);
    await expect(verifyRouterToken(minted.token, { ...keys, secret: 'another-secret-entirely' })).rejects.toThrow();
    const claims = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { exp: number; iat: number };
    expect(claims(minted.token).exp - claims(minted.token).iat).toBe(600);

    // Without --ttl: the configured maximum, which a shorter maximum lowers.
    const longest = await admin('router', 'token', '--account', created.account_id);
    expect(longest.expires_in).toBe(30 * 24 * 3600);
    expect(claims(longest.token).exp - claims(longest.token).iat).toBe(30 * 24 * 3600);
    const short = JSON.parse((await stack.admin(['router', 'token', '--account', created.account_id], { ROUTER_TOKEN_MAX_LIFETIME_SECONDS: '3600' })).stdout);
    expect(short.expires_in).toBe(3600);
    const refused = await stack.admin(['router', 'token', '--account', created.account_id, '--ttl', '3601'], { ROUTER_TOKEN_MAX_LIFETIME_SECONDS: '3600' });
    expect({ code: refused.code, stdout: refused.stdout, stderr: refused.stderr }).toEqual({ code: 1, stdout: '', stderr: 'error: --ttl must be a whole number from 1 to 3600\n' });
  });

  it('manages deployments', async () => {
    const created = await admin('account', 'create', '--name', 'Deployer');
    const file = `/tmp/${stack.name}-wf.json`;
    writeFileSync(file, JSON.stringify({ '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } } }));
    expect(await admin('deployment', 'create', '--account', created.account_id, '--id', 'my-app', '--workflow', file)).toEqual({ id: 'my-app', status: 'starting' });
    expect(await admin('deployment', 'ready', '--id', 'my-app')).toEqual({ id: 'my-app', status: 'ready' });
    expect(await admin('deployment', 'ready', '--id', 'my-app')).toEqual({ id: 'my-app', status: 'ready' });
    expect(await admin('deployment', 'stop', '--id', 'my-app')).toEqual({ id: 'my-app', status: 'stopped' });
    expect(await admin('deployment', 'stop', '--id', 'my-app')).toEqual({ id: 'my-app', status: 'stopped' });
  });

  it('creates a deployment idempotently: a rerun reports it as it stands, a different one is refused', async () => {
    const owner = await admin('account', 'create', '--name', 'Deployer 2');
    const other = await admin('account', 'create', '--name', 'Someone else');
    const file = `/tmp/${stack.name}-wf2.json`;
    const workflow = { '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } }, '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'x' } } };
    writeFileSync(file, JSON.stringify(workflow));
    const create = (account: string, wf = file) => stack.admin(['deployment', 'create', '--account', account, '--id', 'twice', '--workflow', wf]);
    expect(JSON.parse((await create(owner.account_id)).stdout)).toEqual({ id: 'twice', status: 'starting' });
    // The same file again, keys in another order: the same deployment, whose state is kept.
    const reordered = `/tmp/${stack.name}-wf2b.json`;
    writeFileSync(reordered, JSON.stringify({ '2': { inputs: { filename_prefix: 'x', images: ['1', 0] }, class_type: 'SaveImage' }, '1': workflow['1'] }));
    await admin('deployment', 'ready', '--id', 'twice');
    const again = await create(owner.account_id, reordered);
    expect({ code: again.code, stderr: again.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(again.stdout)).toEqual({ id: 'twice', status: 'ready' });

    const changed = `/tmp/${stack.name}-wf2c.json`;
    writeFileSync(changed, JSON.stringify({ ...workflow, '1': { ...workflow['1'], inputs: { ...workflow['1'].inputs, width: 16 } } }));
    for (const r of [await create(owner.account_id, changed), await create(other.account_id)]) {
      expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 1, stdout: '' });
      expect(r.stderr).toBe('error: deployment twice already exists with another account or workflow\n');
    }
    const row = await stack.db.deployment.findUniqueOrThrow({ where: { id: 'twice' } });
    expect({ accountId: row.accountId, status: row.status, workflow: row.workflow }).toEqual({ accountId: owner.account_id, status: 'ready', workflow });
  });

  it('pins only workflows in API format', async () => {
    const owner = await admin('account', 'create', '--name', 'Deployer 3');
    const cases: [unknown, RegExp][] = [
      [{ nodes: [], links: [], version: 0.4 }, /editor \(UI\) format/],
      [{}, /no nodes/],
      [{ '1': { inputs: {} } }, /node 1 needs a string class_type/],
      [[1, 2], /not a JSON object/],
    ];
    for (const [i, [workflow, message]] of cases.entries()) {
      const file = `/tmp/${stack.name}-bad${i}.json`;
      writeFileSync(file, JSON.stringify(workflow));
      const r = await stack.admin(['deployment', 'create', '--account', owner.account_id, '--id', `bad-${i}`, '--workflow', file]);
      expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 1, stdout: '' });
      expect(r.stderr).toMatch(message);
    }
    expect(await stack.db.deployment.count({ where: { accountId: owner.account_id } })).toBe(0);
  });

  it('pins only node classes the engines have reported, as a submission checks them', async () => {
    const owner = await admin('account', 'create', '--name', 'Deployer 4');
    const create = (id: string, workflow: unknown, env: Record<string, string> = {}) => {
      const file = `/tmp/${stack.name}-${id}.json`;
      writeFileSync(file, JSON.stringify(workflow));
      return stack.admin(['deployment', 'create', '--account', owner.account_id, '--id', id, '--workflow', file], env);
    };
    const image = { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } };
    const save = { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'x' } };
    const refusals: [string, unknown, Record<string, string>, string][] = [
      ['unknown', { '1': image, '2': { class_type: 'NoSuchNode', inputs: {} }, '3': save, '4': { class_type: 'saveimage', inputs: {} } }, {},
        'error: --workflow uses node classes the engine does not have: NoSuchNode (node 2), saveimage (node 4)\n'],
      // A name every object answers to is no node class.
      ['inherited', { '1': image, '2': { class_type: 'constructor', inputs: {} } }, {}, 'error: --workflow uses node classes the engine does not have: constructor (node 2)\n'],
      // No worker has reported under this prefix: nothing to check against, so nothing is pinned.
      ['no-engine', { '1': image, '2': save }, { REDIS_PREFIX: `${stack.redisPrefix}-none` },
        "error: cannot check the workflow's node classes: no engine has reported its node definitions yet; start a worker, then run this again\n"],
    ];
    for (const [id, workflow, env, stderr] of refusals) {
      const r = await create(id, workflow, env);
      expect({ id, code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({ id, code: 1, stdout: '', stderr });
    }
    const unreachable = await create('no-redis', { '1': image, '2': save }, { REDIS_URL: 'redis://127.0.0.1:1' });
    expect({ code: unreachable.code, stdout: unreachable.stdout }).toEqual({ code: 1, stdout: '' });
    expect(unreachable.stderr).toMatch(/^error: cannot check the workflow's node classes: the engines' node definitions were not read from Redis \(.+\)\n$/);
    expect(await stack.db.deployment.count({ where: { accountId: owner.account_id } })).toBe(0);

    expect(JSON.parse((await create('known', { '1': image, '2': save })).stdout)).toEqual({ id: 'known', status: 'starting' });
    // A rerun reports the pinned deployment as it stands; it pins nothing, so checks nothing.
    const rerun = await create('known', { '1': image, '2': save }, { REDIS_URL: 'redis://127.0.0.1:1' });
    expect({ code: rerun.code, stdout: JSON.parse(rerun.stdout) as unknown }).toEqual({ code: 0, stdout: { id: 'known', status: 'starting' } });
  });

  it('prints help on stdout with exit 0, and a usage error with 64', async () => {
    for (const args of [['help'], ['--help']]) {
      const r = await stack.admin(args);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      expect(r.stdout).toMatch(/^usage: npm run admin/);
      expect(r.stdout).toContain('deployment create --account ID');
    }
    const one = await stack.admin(['key', 'create', '--help']);
    expect({ code: one.code, stdout: one.stdout }).toEqual({ code: 0, stdout: 'usage: npm run admin -- key create --account ID [--name NAME]: prints a new API key (shown once)\n' });
    const bad = await stack.admin(['key', 'create', '--acount', 'x']);
    expect({ code: bad.code, stdout: bad.stdout }).toEqual({ code: 64, stdout: '' });
    expect(bad.stderr).toMatch(/Unknown option '--acount'[\s\S]*usage: npm run admin -- key create --account ID/);
  });

  it('applies a revocation with Redis down, and warns instead of printing a stack trace', async () => {
    const created = await admin('account', 'create', '--name', 'No redis');
    const key = await admin('key', 'create', '--account', created.account_id);
    const r = await stack.admin(['key', 'revoke', '--key', key.key_id], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect({ code: r.code, stdout: JSON.parse(r.stdout) as unknown }).toEqual({ code: 0, stdout: { revoked: 1 } });
    expect(r.stderr).toBe('warning: Redis unreachable: API replicas apply the change once their cached lookups expire\n');
  });

  it('names the reason in one line when PostgreSQL is unreachable', async () => {
    const r = await stack.admin(['account', 'show', '--account', '00000000-0000-4000-8000-000000000000'], { DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/nothing' });
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 1, stdout: '' });
    expect(r.stderr).toBe("error: Can't reach database server at 127.0.0.1:1\n");
  });

  it.each([
    [['account', 'create'], /--name is required/],
    [['account', 'create', '--name', 'x', '--tier', 'platinum'], /Unknown tier/],
    [['account', 'create', '--name', 'x', '--credits', 'lots'], /whole number/],
    [['credits', 'add', '--account', '00000000-0000-4000-8000-000000000000', '--amount', '1'], /no account/],
    [['key', 'revoke', '--key', 'cck_nothere'], /no key with that id or prefix/],
    [['account', 'set', '--account', '00000000-0000-4000-8000-000000000000', '--max-queued-jobs', '99999999999'], /--max-queued-jobs must be a whole number from 0 to 2147483647/],
    [['account', 'create', '--name', 'x', '--credits', '99999999999999999999'], /--credits must be between/],
    [['credits', 'add', '--account', '00000000-0000-4000-8000-000000000000', '--amount=-99999999999999999999'], /--amount must be between/],
    [['router', 'token', '--account', '00000000-0000-4000-8000-000000000000', '--ttl', '0'], /--ttl must be a whole number from 1/],
    [['account', 'set', '--account', 'nope'], /no account/],
    [['deployment', 'create', '--account', '00000000-0000-4000-8000-000000000000', '--id', 'Bad_Id', '--workflow', '/nonexistent'], /no account|DNS label/],
    [['nonsense'], /usage: npm run admin/],
    [['account', 'create', '--bogus'], /Unknown option/],
  ])('fails clearly on %j', async (args, message) => {
    const r = await stack.admin(args);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
    // One plain message: no stack trace, no driver dump.
    expect(r.stderr).not.toMatch(/\n\s+at |Invalid `prisma/);
    expect(r.stdout).toBe('');
  });

  it('refuses a router token that would be born expired', async () => {
    const created = await admin('account', 'create', '--name', 'Router ttl');
    for (const ttl of ['0', '-5']) {
      const r = await stack.admin(['router', 'token', '--account', created.account_id, `--ttl=${ttl}`]);
      expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({ code: 1, stdout: '', stderr: 'error: --ttl must be a whole number from 1 to 2592000\n' });
    }
  });

  it('stops with the name of a bad environment variable', async () => {
    const r = await stack.admin(['account', 'show', '--account', 'x'], { DATABASE_URL: 'nope' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/DATABASE_URL/);
  });
});
