import { createHash } from 'node:crypto';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/client.js';

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

/** Prisma over node-postgres: the query compiler runs in WebAssembly, so no engine binary is needed. */
export function createPrismaClient(databaseUrl: string, poolSize = 10, options: DbOptions = {}): Db {
  const adapter = new PrismaPg(
    { connectionString: databaseUrl, max: poolSize, connectionTimeoutMillis: 5_000 },
    options.preparedStatements === false ? {} : { statementNameGenerator: statementNamer() },
  );
  return new PrismaClient({ adapter });
}
