import { Inject, Injectable } from '@nestjs/common';
import { notExpired } from '#libs/assets';
import type { Config } from '#libs/config';
import { ASSET_KINDS, AssetListQuerySchema } from '#libs/contracts';
import type { Asset, Db, Prisma } from '#libs/db';
import { CONFIG, DB } from '../../core/tokens.js';
import { pageAsked, pageCursor, type PageAfter } from '../paging.js';
import { parseV2Input } from '../parse-input.js';

const PURPOSE = 'v2-assets';
export type AssetKind = (typeof ASSET_KINDS)[number];

export interface AssetPageQuery {
  limit: number;
  /** Uploads (no job), outputs (a job's), or both. */
  kind: AssetKind | null;
  after: PageAfter | null;
}

/**
 * `GET /api/v2/assets`: the caller's live assets, newest first, one page at a time. Reads the
 * (account_id, created_at DESC, id DESC) index, so a page costs the same however many assets
 * came before it.
 */
@Injectable()
export class AssetList {
  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  parse(query: unknown, accountId: string): AssetPageQuery {
    const q = parseV2Input(AssetListQuerySchema, query);
    return { ...pageAsked(q, this.config.signingSecret, PURPOSE, accountId), kind: q.kind ?? null };
  }

  /** Up to `limit + 1` rows: the one past the page says whether another follows. */
  async page(accountId: string, q: AssetPageQuery): Promise<(Asset & { blob: { sizeBytes: bigint } })[]> {
    const where: Prisma.AssetWhereInput[] = [{ accountId }, notExpired()];
    if (q.kind === 'upload') where.push({ jobId: null });
    if (q.kind === 'output') where.push({ jobId: { not: null } });
    if (q.after) {
      const t = new Date(q.after.t);
      where.push({ OR: [{ createdAt: { lt: t } }, { createdAt: t, id: { lt: q.after.id } }] });
    }
    return this.db.asset.findMany({
      where: { AND: where },
      include: { blob: { select: { sizeBytes: true } } },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      take: q.limit + 1,
    });
  }

  nextCursor(accountId: string, last: Asset): string {
    return pageCursor(this.config.signingSecret, PURPOSE, accountId, last);
  }
}
