import { Redis } from 'ioredis';
import { AccountsService } from '#libs/accounts';
import { applyMigrations, createPrismaClient, dropDatabase, ensureDatabase, type Db } from '#libs/db';
import { deletePrefixedKeys } from '#libs/jobs';
import { TEST_PG_URL, TEST_REDIS_URL, TEST_ROUTER_SECRET, TEST_S3_ENDPOINT, TEST_SIGNING_SECRET, databaseUrl, uniqueName } from './env.js';
import { runCommand, startProcess, type RunningProcess } from './processes.js';

export type StorageKind = 'local' | 's3';

/** Where a stack's PostgreSQL, Redis and S3 live: the shared test services unless a suite brings its own. */
export interface StackServices {
  pgAdminUrl: string;
  redisUrl: string;
  s3Endpoint: string;
}

export const SHARED_SERVICES: StackServices = { pgAdminUrl: TEST_PG_URL, redisUrl: TEST_REDIS_URL, s3Endpoint: TEST_S3_ENDPOINT };

/**
 * One suite's private world: its own PostgreSQL database, Redis key prefix, blob directory or
 * bucket. Processes started through it share these settings. `close()` removes all of it.
 */
export class TestStack {
  readonly name = uniqueName('cct');
  readonly databaseUrl: string;
  readonly redisPrefix = this.name;
  readonly bucket = this.name.replace(/_/g, '-').toLowerCase();
  readonly blobDir = `/tmp/${this.name}/blobs`;
  db!: Db;
  accounts!: AccountsService;
  private readonly processes: RunningProcess[] = [];

  constructor(
    readonly storage: StorageKind = 'local',
    readonly services: StackServices = SHARED_SERVICES,
  ) {
    this.databaseUrl = databaseUrl(this.name, services.pgAdminUrl);
  }

  async open(): Promise<this> {
    await ensureDatabase(this.databaseUrl);
    await applyMigrations(this.databaseUrl);
    this.db = createPrismaClient(this.databaseUrl, 4);
    this.accounts = new AccountsService(this.db);
    return this;
  }

  /** Environment every process of this stack gets; `extra` overrides. */
  env(extra: Record<string, string> = {}): Record<string, string> {
    const storage: Record<string, string> =
      this.storage === 's3'
        ? {
            STORAGE_DRIVER: 's3',
            S3_ENDPOINT: this.services.s3Endpoint,
            S3_BUCKET: this.bucket,
            S3_ACCESS_KEY_ID: 'S3RVER',
            S3_SECRET_ACCESS_KEY: 'S3RVER',
            S3_FORCE_PATH_STYLE: 'true',
          }
        : { STORAGE_DRIVER: 'local', STORAGE_DIR: this.blobDir };
    return {
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      DATABASE_URL: this.databaseUrl,
      REDIS_URL: this.services.redisUrl,
      REDIS_PREFIX: this.redisPrefix,
      SIGNING_SECRET: TEST_SIGNING_SECRET,
      ROUTER_JWT_SECRET: TEST_ROUTER_SECRET,
      API_HOST: '127.0.0.1',
      API_PORT: '0',
      ...storage,
      ...extra,
    };
  }

  async startApi(extra: Record<string, string> = {}): Promise<RunningProcess> {
    const proc = await startProcess('apps/api/src/main.js', this.env(extra));
    this.processes.push(proc);
    return proc;
  }

  async start(entry: string, extra: Record<string, string> = {}, readyMessage?: string): Promise<RunningProcess> {
    const proc = await startProcess(entry, this.env(extra), { readyMessage });
    this.processes.push(proc);
    return proc;
  }

  admin(args: string[], extra: Record<string, string> = {}) {
    return runCommand('apps/admin/src/main.js', args, this.env(extra));
  }

  /** A fresh account with an API key, created directly in the database. */
  async account(opts: { tier?: string; credits?: bigint; name?: string } = {}): Promise<{ id: string; key: string }> {
    const { account, apiKey } = await this.accounts.createAccount({
      name: opts.name ?? 'test',
      tier: opts.tier ?? 'pro',
      credits: opts.credits ?? 1_000_000n,
    });
    return { id: account.id, key: apiKey };
  }

  async close(): Promise<void> {
    await Promise.all(this.processes.map((p) => p.stop()));
    await this.db?.$disconnect();
    await dropDatabase(this.databaseUrl);
    await deleteRedisPrefix(this.redisPrefix, this.services.redisUrl);
    const { rm } = await import('node:fs/promises');
    await rm(`/tmp/${this.name}`, { recursive: true, force: true });
  }
}

export async function deleteRedisPrefix(prefix: string, redisUrl = TEST_REDIS_URL): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    await deletePrefixedKeys(redis, prefix);
  } finally {
    redis.disconnect();
  }
}

export { TEST_SIGNING_SECRET, TEST_ROUTER_SECRET };
