import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/client.js';

export type Db = PrismaClient;

/** Prisma over node-postgres: the query compiler runs in WebAssembly, so no engine binary is needed. */
export function createPrismaClient(databaseUrl: string, poolSize = 10): Db {
  const adapter = new PrismaPg({ connectionString: databaseUrl, max: poolSize, connectionTimeoutMillis: 5_000 });
  return new PrismaClient({ adapter });
}
