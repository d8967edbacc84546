import { readFile } from 'node:fs/promises';
import type { ParseArgsConfig } from 'node:util';
import { stringify as stableStringify } from 'safe-stable-stringify';
import type { AccountLimitsPatch, AccountsService } from '#libs/accounts';
import type { Config } from '#libs/config';
import type { Db } from '#libs/db';
import { nodeDefinition, workflowFormat, type ApiWorkflow, type NodeDefinitions } from '#libs/workflow';

export interface CommandContext {
  values: Record<string, string | undefined>;
  db: Db;
  config: Config;
  accounts: AccountsService;
  mintRouterToken: (secret: string, accountId: string, ttlSeconds?: number) => Promise<string>;
  /** The node definitions the engines last reported (Redis), which submissions validate against; null before any. */
  nodeDefinitions: () => Promise<NodeDefinitions | null>;
}

export interface Command {
  group: string;
  action: string;
  summary: string;
  options: NonNullable<ParseArgsConfig['options']>;
  changesAuth?: boolean;
  run(ctx: CommandContext): Promise<unknown>;
}

export class InputError extends Error {}

function required(values: Record<string, string | undefined>, name: string): string {
  const v = values[name];
  if (v === undefined || v === '') throw new InputError(`--${name} is required`);
  return v;
}

// The columns behind the flags: credits are PostgreSQL bigint, limits integer. A value outside
// them would otherwise reach the database and come back as a driver error.
const BIGINT_MAX = 2n ** 63n - 1n;
const INT_MAX = 2 ** 31 - 1;

function wholeNumber(value: string, name: string): bigint {
  if (!/^-?\d+$/.test(value)) throw new InputError(`--${name} must be a whole number`);
  const n = BigInt(value);
  if (n > BIGINT_MAX || n < -BIGINT_MAX) throw new InputError(`--${name} must be between -${BIGINT_MAX} and ${BIGINT_MAX}`);
  return n;
}

function boundedInt(value: string, name: string, min: number, max = INT_MAX): number {
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) throw new InputError(`--${name} must be a whole number from ${min} to ${max}`);
  return Number(value);
}

function optionalInt(values: Record<string, string | undefined>, name: string): number | undefined {
  const v = values[name];
  return v === undefined ? undefined : boundedInt(v, name, 0);
}

/** A byte count for a bigint column: zero or more. */
function optionalBytes(values: Record<string, string | undefined>, name: string): bigint | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const n = wholeNumber(v, name);
  if (n < 0n) throw new InputError(`--${name} must be 0 or more`);
  return n;
}

function optionalBool(values: Record<string, string | undefined>, name: string): boolean | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  if (v !== 'true' && v !== 'false') throw new InputError(`--${name} must be true or false`);
  return v === 'true';
}

async function accountExists(db: Db, id: string): Promise<void> {
  if (!/^[0-9a-f-]{36}$/i.test(id) || !(await db.account.findUnique({ where: { id }, select: { id: true } }))) {
    throw new InputError(`no account with id ${id}`);
  }
}

const str = { type: 'string' } as const;

const LIMIT_FLAGS = {
  tier: str,
  status: str,
  'max-concurrent-jobs': str,
  'max-queued-jobs': str,
  'requests-per-minute': str,
  'max-event-streams': str,
  'max-model-bytes': str,
  'router-enabled': str,
  'router-entitlements': str,
  'router-max-concurrent': str,
  'router-spend-cap-cents': str,
  'router-window-calls': str,
  'router-window-seconds': str,
} as const;

function limitsPatch(v: Record<string, string | undefined>): AccountLimitsPatch {
  const status = v.status;
  if (status !== undefined && status !== 'active' && status !== 'inactive') throw new InputError('--status must be active or inactive');
  const patch: AccountLimitsPatch = {
    tier: v.tier,
    status,
    maxConcurrentJobs: optionalInt(v, 'max-concurrent-jobs'),
    maxQueuedJobs: optionalInt(v, 'max-queued-jobs'),
    requestsPerMinute: optionalInt(v, 'requests-per-minute'),
    maxEventStreams: optionalInt(v, 'max-event-streams'),
    maxModelBytes: optionalBytes(v, 'max-model-bytes'),
    routerEnabled: optionalBool(v, 'router-enabled'),
    routerEntitlements:
      v['router-entitlements'] === undefined ? undefined : v['router-entitlements'].split(',').map((s) => s.trim()).filter(Boolean),
    routerMaxConcurrent: optionalInt(v, 'router-max-concurrent'),
    routerSpendCapCents: optionalInt(v, 'router-spend-cap-cents'),
    routerWindowCalls: optionalInt(v, 'router-window-calls'),
    routerWindowSeconds: optionalInt(v, 'router-window-seconds'),
  };
  return Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined)) as AccountLimitsPatch;
}

function accountJson(a: { id: string; name: string; tier: string; status: string; creditBalance: bigint } & Record<string, unknown>) {
  return {
    id: a.id,
    name: a.name,
    tier: a.tier,
    status: a.status,
    credits: a.creditBalance,
    limits: {
      max_concurrent_jobs: a.maxConcurrentJobs,
      max_queued_jobs: a.maxQueuedJobs,
      requests_per_minute: a.requestsPerMinute,
      max_event_streams: a.maxEventStreams,
      max_model_bytes: a.maxModelBytes,
    },
    router: {
      enabled: a.routerEnabled,
      entitlements: a.routerEntitlements,
      max_concurrent: a.routerMaxConcurrent,
      spend_cap_cents: a.routerSpendCapCents,
      window_calls: a.routerWindowCalls,
      window_seconds: a.routerWindowSeconds,
    },
  };
}

export const commands: Command[] = [
  {
    group: 'account',
    action: 'create',
    summary: '--name NAME [--tier free|pro|enterprise] [--credits N]: prints the account id and a new API key',
    options: { name: str, tier: str, credits: str },
    async run({ values, accounts }) {
      const credits = wholeNumber(values.credits ?? '0', 'credits');
      const { account, apiKey } = await accounts.createAccount({ name: required(values, 'name'), tier: values.tier ?? 'free', credits });
      return { account_id: account.id, api_key: apiKey, tier: account.tier, credits: account.creditBalance };
    },
  },
  {
    group: 'account',
    action: 'show',
    summary: '--account ID',
    options: { account: str },
    async run({ values, db }) {
      const id = required(values, 'account');
      await accountExists(db, id);
      return accountJson(await db.account.findUniqueOrThrow({ where: { id } }));
    },
  },
  {
    group: 'account',
    action: 'set',
    summary: '--account ID [--tier T] [--status active|inactive] [--max-concurrent-jobs N] [--max-queued-jobs N] [--requests-per-minute N] [--max-event-streams N] [--max-model-bytes N] [--router-enabled true|false] [--router-entitlements a/b,c/*] [--router-max-concurrent N] [--router-spend-cap-cents N] [--router-window-calls N] [--router-window-seconds N]',
    options: { account: str, ...LIMIT_FLAGS },
    changesAuth: true,
    async run({ values, db, accounts }) {
      const id = required(values, 'account');
      const patch = limitsPatch(values);
      await accountExists(db, id);
      return accountJson(await accounts.setLimits(id, patch));
    },
  },
  {
    group: 'key',
    action: 'create',
    summary: '--account ID [--name NAME]: prints a new API key (shown once)',
    options: { account: str, name: str },
    async run({ values, db, accounts }) {
      const id = required(values, 'account');
      await accountExists(db, id);
      const key = await accounts.createApiKey(id, values.name ?? 'default');
      return { key_id: key.id, api_key: key.key, prefix: key.prefix };
    },
  },
  {
    group: 'key',
    action: 'revoke',
    summary: '--key KEY_ID_OR_PREFIX',
    options: { key: str },
    changesAuth: true,
    async run({ values, accounts }) {
      const { revoked, already } = await accounts.revokeApiKey(required(values, 'key'));
      if (revoked > 0) return { revoked };
      // Running it again is safe: a key revoked before stays revoked, and says so.
      if (already === 0) throw new InputError('no key with that id or prefix');
      return { revoked: 0, already_revoked: already };
    },
  },
  {
    group: 'credits',
    action: 'add',
    summary: '--account ID --amount N (deduct with --amount=-N)',
    options: { account: str, amount: str },
    changesAuth: true,
    async run({ values, db, accounts }) {
      const id = required(values, 'account');
      const amount = wholeNumber(required(values, 'amount'), 'amount');
      await accountExists(db, id);
      const balance = await accounts.addCredits(id, amount, 'admin');
      return { account_id: id, credits: balance };
    },
  },
  {
    group: 'router',
    action: 'token',
    summary: '--account ID [--ttl SECONDS]: mints a router JWT (HS256, ROUTER_JWT_SECRET) expiring within ROUTER_TOKEN_MAX_LIFETIME_SECONDS (its default)',
    options: { account: str, ttl: str },
    async run({ values, db, config, mintRouterToken }) {
      const id = required(values, 'account');
      // A token that is born expired is of no use to anyone; one past the maximum lifetime, refused by every replica.
      const max = config.router.tokenMaxLifetimeSeconds;
      const ttl = values.ttl === undefined ? max : boundedInt(values.ttl, 'ttl', 1, max);
      await accountExists(db, id);
      if (!config.router.jwtSecret) throw new InputError('ROUTER_JWT_SECRET is not configured');
      return { token: await mintRouterToken(config.router.jwtSecret, id, ttl), expires_in: ttl };
    },
  },
  {
    group: 'deployment',
    action: 'create',
    summary: '--account ID --id DEPLOYMENT_ID --workflow FILE.json: pins a workflow of node classes the engines have (state starting)',
    options: { account: str, id: str, workflow: str },
    async run({ values, db, nodeDefinitions }) {
      const accountId = required(values, 'account');
      await accountExists(db, accountId);
      const id = required(values, 'id');
      if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(id)) throw new InputError('--id must be a DNS label (a-z, 0-9, -)');
      let workflow: unknown;
      try {
        workflow = JSON.parse(await readFile(required(values, 'workflow'), 'utf8'));
      } catch (err) {
        throw new InputError(`--workflow: ${(err as Error).message}`);
      }
      const problem = apiFormatProblem(workflow);
      if (problem) throw new InputError(`--workflow must hold a workflow in API format: ${problem}`);
      // Safe to run again (a deploy script retried): the same deployment is reported as it stands.
      // Compared with keys sorted: PostgreSQL's jsonb does not keep the order they were written in.
      const existing = async () => {
        const row = await db.deployment.findUnique({ where: { id } });
        if (!row) return null;
        if (row.accountId !== accountId || stableStringify(row.workflow) !== stableStringify(workflow)) {
          throw new InputError(`deployment ${id} already exists with another account or workflow`);
        }
        return { id: row.id, status: row.status };
      };
      const found = await existing();
      if (found) return found;
      await checkNodeClasses(workflow as ApiWorkflow, nodeDefinitions);
      try {
        const row = await db.deployment.create({ data: { id, accountId, workflow: workflow as object } });
        return { id: row.id, status: row.status };
      } catch (err) {
        // Two runs at once: the one that lost the insert reports the row the other made.
        if ((err as { code?: string }).code === 'P2002') {
          const raced = await existing();
          if (raced) return raced;
        }
        throw err;
      }
    },
  },
  ...(['ready', 'stop'] as const).map(
    (action): Command => ({
      group: 'deployment',
      action,
      summary: `--id DEPLOYMENT_ID: marks the deployment ${action === 'ready' ? 'ready' : 'stopped'}`,
      options: { id: str },
      async run({ values, db }) {
        const id = required(values, 'id');
        const found = await db.deployment.findUnique({ where: { id } });
        if (!found) throw new InputError(`no deployment with id ${id}`);
        const row = await db.deployment.update({ where: { id }, data: { status: action === 'ready' ? 'ready' : 'stopped' } });
        return { id: row.id, status: row.status };
      },
    }),
  ),
];

/**
 * Refuses node classes the engines do not have, looked up as a submission does. Every job of a
 * deployment keeps the pinned classes, so each would be refused, and a pin cannot be changed.
 */
async function checkNodeClasses(workflow: ApiWorkflow, nodeDefinitions: () => Promise<NodeDefinitions | null>): Promise<void> {
  let defs: NodeDefinitions | null;
  try {
    defs = await nodeDefinitions();
  } catch (err) {
    throw new InputError(`cannot check the workflow's node classes: the engines' node definitions were not read from Redis (${(err as Error).message})`);
  }
  if (!defs) throw new InputError("cannot check the workflow's node classes: no engine has reported its node definitions yet; start a worker, then run this again");
  const unknown = Object.entries(workflow).filter(([, node]) => !nodeDefinition(defs, node.class_type));
  if (unknown.length > 0) {
    throw new InputError(`--workflow uses node classes the engine does not have: ${unknown.map(([id, node]) => `${node.class_type} (node ${id})`).join(', ')}`);
  }
}

/** Why `workflow` is not an API-format graph (node id -> {class_type, inputs}), or null. */
function apiFormatProblem(workflow: unknown): string | null {
  const format = workflowFormat(workflow);
  if (format === 'invalid') return 'not a JSON object';
  if (format === 'ui') return 'this is the editor (UI) format; export it with "Save (API)"';
  const nodes = Object.entries(workflow as Record<string, unknown>);
  if (nodes.length === 0) return 'it has no nodes';
  for (const [nodeId, node] of nodes) {
    const n = node as { class_type?: unknown; inputs?: unknown } | null;
    if (typeof n !== 'object' || n === null || typeof n.class_type !== 'string' || typeof n.inputs !== 'object' || n.inputs === null || Array.isArray(n.inputs)) {
      return `node ${nodeId} needs a string class_type and an inputs object`;
    }
  }
  return null;
}

export function usage(): string {
  return ['usage: npm run admin -- <group> <action> [flags]', ...commands.map((c) => `  ${c.group} ${c.action} ${c.summary}`)].join('\n');
}
