import { generateApiKey } from '#libs/auth';
import type { Db, Account } from '#libs/db';
import { moveCredits, recordOpeningCredits } from './billing.js';
import { tierLimits } from './tiers.js';

export interface AccountLimitsPatch {
  tier?: string;
  status?: 'active' | 'inactive';
  maxConcurrentJobs?: number;
  maxQueuedJobs?: number;
  requestsPerMinute?: number;
  maxEventStreams?: number;
  maxModelBytes?: bigint;
  routerEnabled?: boolean;
  routerEntitlements?: string[];
  routerMaxConcurrent?: number;
  routerSpendCapCents?: number;
  routerWindowCalls?: number;
  routerWindowSeconds?: number;
}

/** Account administration shared by the admin command line and the demo bootstrap. */
export class AccountsService {
  constructor(private readonly db: Db) {}

  async createAccount(input: { name: string; tier: string; credits: bigint }): Promise<{ account: Account; apiKey: string }> {
    const limits = tierLimits(input.tier);
    const generated = generateApiKey();
    const account = await this.db.$transaction(async (tx) => {
      const created = await tx.account.create({
        data: { name: input.name, tier: input.tier, creditBalance: input.credits, ...limits },
      });
      await tx.apiKey.create({ data: { accountId: created.id, prefix: generated.prefix, hash: generated.hash } });
      if (input.credits !== 0n) {
        await recordOpeningCredits(tx, created.id, input.credits);
      }
      return created;
    });
    return { account, apiKey: generated.key };
  }

  async createApiKey(accountId: string, name = 'default'): Promise<{ id: string; key: string; prefix: string }> {
    const generated = generateApiKey();
    const row = await this.db.apiKey.create({ data: { accountId, name, prefix: generated.prefix, hash: generated.hash } });
    return { id: row.id, key: generated.key, prefix: generated.prefix };
  }

  /** Revokes by key id or by visible prefix; returns how many keys were revoked. */
  /** Revokes the keys with this id or prefix; `already` counts those revoked before (running it again is safe). */
  async revokeApiKey(idOrPrefix: string): Promise<{ revoked: number; already: number }> {
    const key = /^[0-9a-f-]{36}$/i.test(idOrPrefix) ? { id: idOrPrefix } : { prefix: idOrPrefix };
    const result = await this.db.apiKey.updateMany({ where: { ...key, revokedAt: null }, data: { revokedAt: new Date() } });
    const already = result.count > 0 ? 0 : await this.db.apiKey.count({ where: key });
    return { revoked: result.count, already };
  }

  async addCredits(accountId: string, amount: bigint, reason = 'grant'): Promise<bigint> {
    return this.db.$transaction((tx) => moveCredits(tx, accountId, amount, reason));
  }

  async setLimits(accountId: string, patch: AccountLimitsPatch): Promise<Account> {
    const fromTier = patch.tier ? tierLimits(patch.tier) : {};
    return this.db.account.update({ where: { id: accountId }, data: { ...fromTier, ...patch } });
  }
}
