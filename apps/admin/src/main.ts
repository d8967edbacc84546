import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { AccountsService, type AccountLimitsPatch } from '#libs/accounts';
import { mintRouterToken } from '#libs/auth';
import { ConfigError, loadConfig, type Config } from '#libs/config';
import { createPrismaClient, type Db } from '#libs/db';
import { EngineReportCache, jobKeys } from '#libs/jobs';
import type { NodeDefinitions } from '#libs/workflow';
import { commands, usage, type Command } from './commands.js';

// `npm run admin -- <group> <action> [--flags]`: operator tasks. Every command prints one JSON
// object on stdout; errors go to stderr with a non-zero exit code.

class UsageError extends Error {}

async function announceChange(config: Config): Promise<void> {
  // API replicas cache key lookups; this tells them to forget, so revocations apply at once.
  const redis = new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  // The failure is reported below; unhandled, ioredis would print it again with a stack trace.
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.publish(`${config.redisPrefix}:auth:changed`, 'admin');
  } catch {
    // The change is made; without Redis the replicas' caches still expire within seconds.
    process.stderr.write('warning: Redis unreachable: API replicas apply the change once their cached lookups expire\n');
  } finally {
    redis.disconnect();
  }
}

async function nodeDefinitions(config: Config): Promise<NodeDefinitions | null> {
  const redis = new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await new EngineReportCache<NodeDefinitions>(redis, jobKeys(config.redisPrefix).nodeDefinitions).get();
  } finally {
    redis.disconnect();
  }
}

class Help {
  constructor(readonly text: string) {}
}

async function run(argv: string[]): Promise<unknown> {
  const [group, action, ...rest] = argv;
  if (group !== undefined && ['help', '--help', '-h'].includes(group)) return new Help(usage());
  const command: Command | undefined = commands.find((c) => c.group === group && c.action === action);
  if (!command) throw new UsageError(usage());
  const line = `usage: npm run admin -- ${command.group} ${command.action} ${command.summary}`;
  if (rest.includes('--help') || rest.includes('-h')) return new Help(line);
  let values;
  try {
    ({ values } = parseArgs({ args: rest, options: command.options, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${line}`);
  }
  const config = loadConfig();
  const db: Db = createPrismaClient(config.databaseUrl, 2, { preparedStatements: config.databasePreparedStatements });
  try {
    const result = await command.run({ values: values as Record<string, string | undefined>, db, config, accounts: new AccountsService(db), mintRouterToken, nodeDefinitions: () => nodeDefinitions(config) });
    if (command.changesAuth) await announceChange(config);
    return result;
  } finally {
    await db.$disconnect();
  }
}

/** Prisma's messages open with the call that failed and bury the reason on their last line. */
function reason(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (!/Invalid `prisma\./.test(message)) return message;
  return message.trim().split('\n').filter((l) => l.trim() !== '').at(-1)!.trim();
}

try {
  const result = await run(process.argv.slice(2));
  if (result instanceof Help) process.stdout.write(`${result.text}\n`);
  else process.stdout.write(`${JSON.stringify(result, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v))}\n`);
} catch (err) {
  const message = err instanceof UsageError || err instanceof ConfigError ? err.message : `error: ${reason(err)}`;
  process.stderr.write(`${message}\n`);
  process.exit(err instanceof UsageError ? 64 : 1);
}

export type { AccountLimitsPatch };
