export { createPrismaClient, executeStatement, queryRows, statementNamer, PLAN_PER_CALL } from './client.js';
export type { Db } from './client.js';
export { applyMigrations, ensureDatabase, dropDatabase, listMigrations } from './migrations.js';
export { Prisma } from './generated/client.js';
export type { Account, ApiKey, Asset, Blob, Job, JobOutput, CreditLedgerEntry, Deployment, RouterModel, RouterCall, JobStatus, WebhookEndpoint, WebhookDelivery } from './generated/client.js';
