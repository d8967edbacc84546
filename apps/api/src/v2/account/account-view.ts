import { Inject, Injectable } from '@nestjs/common';
import type { Config } from '#libs/config';
import { ApiError, PageQuerySchema } from '#libs/contracts';
import { ledgerPage } from '#libs/accounts';
import { JobStore } from '#libs/jobs';
import type { Account, Db } from '#libs/db';
import { CONFIG, DB } from '../../core/tokens.js';
import { AccountLimits } from '../../limits/index.js';
import { ModelStorage } from '../assets/model-storage.js';
import { pageAsked, pageCursor, pageOf } from '../paging.js';
import { parseV2Input } from '../parse-input.js';

const PURPOSE = 'v2-account-charges';

/** One ledger entry as the account route shows it; `amount` is negative for a charge. */
export interface ChargeView {
  id: string;
  amount: number;
  reason: string;
  ref: string | null;
  created_at: string;
}

function chargeView(e: { id: bigint; amount: bigint; reason: string; ref: string | null; createdAt: Date }): ChargeView {
  return { id: String(e.id), amount: Number(e.amount), reason: e.reason, ref: e.ref, created_at: e.createdAt.toISOString() };
}

/**
 * `GET /api/v2/account`: what a tenant may know of its own account, read-only: the balance and
 * the ledger behind it (newest first, paged), the tier's limits and how much of them is in use.
 * The account row is read afresh: the one authentication cached may be seconds old.
 */
@Injectable()
export class AccountView {
  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
    private readonly limits: AccountLimits,
    private readonly models: ModelStorage,
    private readonly jobs: JobStore,
  ) {}

  async render(caller: Account, query: unknown) {
    const { limit, after } = pageAsked(parseV2Input(PageQuerySchema, query), this.config.signingSecret, PURPOSE, caller.id);
    const [account, counts, usage, entries, modelBytes] = await Promise.all([
      this.db.account.findUnique({ where: { id: caller.id } }),
      this.jobs.queueCountsOf(caller.id),
      this.limits.usage(caller),
      ledgerPage(this.db, caller.id, limit, after),
      this.models.usedBytes(caller.id),
    ]);
    // Deleted between authentication and this read: as any other request of a vanished account.
    if (!account) throw new ApiError('unauthorized', 'Missing or invalid credentials.');
    return {
      id: account.id,
      name: account.name,
      tier: account.tier,
      status: account.status,
      credit_balance: Number(account.creditBalance),
      limits: {
        max_concurrent_jobs: account.maxConcurrentJobs,
        max_queued_jobs: account.maxQueuedJobs,
        requests_per_minute: account.requestsPerMinute,
        max_event_streams: account.maxEventStreams,
        max_model_bytes: Number(account.maxModelBytes),
      },
      usage: {
        running_jobs: counts?.running ?? 0,
        queued_jobs: (counts?.waiting ?? 0) + (counts?.handed ?? 0),
        open_event_streams: usage.openStreams,
        requests_this_minute: usage.requestsThisMinute,
        // Bytes of the account's model files (models/<folder>/ assets), each blob once.
        model_bytes: Number(modelBytes),
      },
      router: {
        enabled: account.routerEnabled,
        max_concurrent_calls: account.routerMaxConcurrent,
        spend_cap_cents: account.routerSpendCapCents,
        window_calls: account.routerWindowCalls,
        window_seconds: account.routerWindowSeconds,
      },
      charges: pageOf(entries, limit, entries.slice(0, limit).map(chargeView), (last) => pageCursor(this.config.signingSecret, PURPOSE, caller.id, last)),
    };
  }
}
