import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { AccountsService, type AccountLimitsPatch } from '#libs/accounts';
import { mintRouterToken } from '#libs/auth';
import { ConfigError, loadConfig, type Config } from '#libs/config';
import { createPrismaClient, type Db } from '#libs/db';
import { commands, usage, type Command } from './commands.js';

// `npm run admin -- <group> <action> [--flags]`: operator tasks. Every command prints one JSON
// object on stdout; errors go to stderr with a non-zero exit code.

class UsageError extends Error {}

async function announceChange(config: Config): Promise<void> {
  // API replicas cache key lookups; this tells them to forget, so revocations apply at once.
  const redis = new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    await redis.publish(`${config.redisPrefix}:auth:changed`, 'admin');
  } catch {
    // Without Redis the caches still expire within seconds.
  } finally {
    redis.disconnect();
  }
}

async function run(argv: string[]): Promise<unknown> {
  const [group, action, ...rest] = argv;
  const command: Command | undefined = commands.find((c) => c.group === group && c.action === action);
  if (!command) throw new UsageError(usage());
  const { values } = parseArgs({ args: rest, options: command.options, strict: true, allowPositionals: false });
  const config = loadConfig();
  const db: Db = createPrismaClient(config.databaseUrl, 2, { preparedStatements: config.databasePreparedStatements });
  try {
    const result = await command.run({ values: values as Record<string, string | undefined>, db, config, accounts: new AccountsService(db), mintRouterToken });
    if (command.changesAuth) await announceChange(config);
    return result;
  } finally {
    await db.$disconnect();
  }
}

try {
  const result = await run(process.argv.slice(2));
  process.stdout.write(`${JSON.stringify(result, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v))}\n`);
} catch (err) {
  const message = err instanceof UsageError || err instanceof ConfigError ? err.message : `error: ${(err as Error).message}`;
  process.stderr.write(`${message}\n`);
  process.exit(err instanceof UsageError ? 64 : 1);
}

export type { AccountLimitsPatch };
