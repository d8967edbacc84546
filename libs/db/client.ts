import { createHash } from 'node:crypto';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient, type Prisma } from './generated/client.js';

export type Db = PrismaClient;

// PostgreSQL plans an unnamed statement every time it is sent. For the scheduler's statement that
// planning costs several times its execution (about 3 ms against 0.7 ms on this project's 2-core
// machine). A named statement is parsed once per connection and, after five runs, executed on a
// cached generic plan, as Prisma's former query engine did by default.
//
// A statement whose good plan depends on its parameter values (a generic plan for it would be
// slow) carries this comment in its SQL and is sent unnamed, planned on every call.
export const PLAN_PER_CALL = '/* plan per call */';

// Past this many distinct texts further ones go unnamed, so no connection collects prepared
// statements without bound.
const MAX_NAMED_STATEMENTS = 2_000;

/** Names SQL texts for node-postgres's per-connection statement cache ('' = unnamed). */
export function statementNamer(max = MAX_NAMED_STATEMENTS): (query: { sql: string }) => string {
  const names = new Map<string, string>();
  return ({ sql }) => {
    let name = names.get(sql);
    if (name === undefined) {
      if (names.size >= max || sql.includes(PLAN_PER_CALL)) return '';
      // One text, one name: node-postgres refuses a name reused for a different text.
      name = `p${createHash('sha256').update(sql).digest('base64url').slice(0, 30)}`;
      names.set(sql, name);
    }
    return name;
  };
}

export interface DbOptions {
  /** Named statements (see above); off behind a pooler that cannot keep them (PgBouncer in transaction mode before 1.21). */
  preparedStatements?: boolean;
}

/** The pool under a client made by createPrismaClient, and how its statements are named. */
const direct = new WeakMap<object, { pool: pg.Pool; name: ((query: { sql: string }) => string) | null }>();

/** Prisma over node-postgres: the query compiler runs in WebAssembly, so no engine binary is needed. */
export function createPrismaClient(databaseUrl: string, poolSize = 10, options: DbOptions = {}): Db {
  // The pool is made here rather than by the adapter so that `queryRows` can use it too.
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize, connectionTimeoutMillis: 5_000 });
  // An idle connection that fails is dropped by the pool; the adapter adds its own listener only
  // once Prisma first connects, and a direct statement may come before that.
  pool.on('error', () => undefined);
  const name = options.preparedStatements === false ? null : statementNamer();
  const adapter = new PrismaPg(pool, { disposeExternalPool: true, ...(name ? { statementNameGenerator: name } : {}) });
  const db = new PrismaClient({ adapter });
  direct.set(db, { pool, name });
  return db;
}

/**
 * Runs a raw statement straight on the client's node-postgres pool (named and prepared as Prisma's
 * own statements are), for the few statements on a job's or a call's path: Prisma's handling of a raw
 * query (its interpreter, tracing wrappers, per-cell conversion of the result) cost more API time
 * than the statement's round trip. Rows come as node-postgres parses them: timestamps as Date,
 * json as parsed values, int8 and numeric as text (the caller converts). A client made otherwise
 * goes through `$queryRaw`, whose rows the caller must then take the same way.
 */
export async function queryRows<T>(db: Db, query: Prisma.Sql): Promise<T[]> {
  const own = direct.get(db);
  if (!own) return db.$queryRaw<T[]>(query);
  return (await onPool<T>(own, query)).rows;
}

/** `$executeRaw` the way `queryRows` runs a query: straight on the pool; the number of rows it wrote. */
export async function executeStatement(db: Db, query: Prisma.Sql): Promise<number> {
  const own = direct.get(db);
  if (!own) return db.$executeRaw(query);
  return (await onPool(own, query)).rowCount ?? 0;
}

function onPool<T>(own: { pool: pg.Pool; name: ((query: { sql: string }) => string) | null }, query: Prisma.Sql): Promise<pg.QueryResult<T & pg.QueryResultRow>> {
  return own.pool.query<T & pg.QueryResultRow>({ name: own.name?.({ sql: query.text }) || undefined, text: query.text, values: query.values as unknown[] });
}
