import { Prisma, type Account, type Deployment } from '#libs/db';

/**
 * Whose jobs a request sees: the account's, and on the deployment surface only the addressed
 * deployment's, so that a deployment's API reads, lists and cancels nothing else of the account
 * (its cloud jobs, another deployment's). `deploymentId: null` (cloud, self-hosted) does not filter.
 * A bare account id is the account's jobs unfiltered.
 */
export interface JobScope {
  accountId: string;
  deploymentId: string | null;
}

/** The jobs a request on `deployment` (null off the deployment surface) may see. */
export function scopeOf(account: Pick<Account, 'id'>, deployment: Pick<Deployment, 'id'> | null): JobScope {
  return { accountId: account.id, deploymentId: deployment?.id ?? null };
}

/** The scope as a condition of Prisma's client, so that v1's queue and history filter as v2 does. */
export function scopeWhere(scope: JobScope): Prisma.JobWhereInput {
  return { accountId: scope.accountId, ...(scope.deploymentId === null ? {} : { deploymentId: scope.deploymentId }) };
}

/** The condition on `jobs j` that keeps a raw read within its scope. */
export function inScope(owner: string | JobScope): Prisma.Sql {
  const { accountId, deploymentId } = typeof owner === 'string' ? { accountId: owner, deploymentId: null } : owner;
  const deployment = deploymentId === null ? Prisma.empty : Prisma.sql`AND j.deployment_id = ${deploymentId}`;
  return Prisma.sql`j.account_id = ${accountId}::uuid ${deployment}`;
}
