import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { Config } from '#libs/config';
import { Prisma, type Db, type RouterModel } from '#libs/db';
import { componentLogger } from '#libs/logging';
import { CONFIG, DB } from '../../core/tokens.js';
import type { AdapterKind, UpstreamModel } from '../adapters/index.js';
import { readCatalogFile, type CatalogEntry } from './catalog-file.js';
import { compileInputSchema, type InputSchema } from './input-schema.js';

/** A runnable model as calls see it: catalog row plus its compiled input schema. */
export interface CatalogModel extends UpstreamModel {
  provider: string;
  model: string;
  adapterKind: AdapterKind;
  priceCents: number;
  chargesOnPolicyRejection: string;
  schema: InputSchema;
}

export interface ModelListEntry {
  id: string;
  provider: string;
  model: string;
  billing: { charges_on_policy_rejection: string };
}

// Calls read models from memory; the database is the source shared by every replica and is
// re-read this often, so a catalog reload by another replica reaches this one quickly.
const REFRESH_MS = 2_000;
const CATALOG_LOCK = 7355609;

@Injectable()
export class CatalogService implements OnModuleInit, OnModuleDestroy {
  private readonly logger = componentLogger('RouterCatalog');
  private models = new Map<string, CatalogModel>();
  private refreshedAt = 0;
  private refreshing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  async onModuleInit(): Promise<void> {
    const entries = await readCatalogFile(this.config.router.catalogFile, this.config.router.upstreamBaseUrls);
    await this.store(entries);
    await this.refresh();
    this.timer = setInterval(() => void this.refresh().catch((err: Error) => this.logger.warn(`catalog refresh failed: ${err.message}`)), REFRESH_MS);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Upserts the file's models and deletes the ones it no longer declares, in one transaction. */
  private async store(entries: CatalogEntry[]): Promise<void> {
    await this.db.$transaction(async (tx) => {
      // Replicas starting together load one after the other.
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(${CATALOG_LOCK})`;
      for (const e of entries) {
        const data = {
          provider: e.provider,
          model: e.model,
          adapterKind: e.adapterKind,
          upstreamUrl: e.upstreamUrl,
          inputSchema: e.inputSchema as Prisma.InputJsonValue,
          inputSchemaText: e.inputSchemaText,
          priceCents: e.priceCents,
          chargesOnPolicyRejection: e.chargesOnPolicyRejection,
          timeoutMs: e.timeoutMs,
          pollIntervalMs: e.pollIntervalMs,
        };
        await tx.routerModel.upsert({ where: { id: e.id }, create: { id: e.id, ...data }, update: data });
      }
      await tx.routerModel.deleteMany({ where: { id: { notIn: entries.map((e) => e.id) } } });
    });
  }

  private refresh(): Promise<void> {
    this.refreshing ??= this.readAll().finally(() => {
      this.refreshing = null;
    });
    return this.refreshing;
  }

  private async readAll(): Promise<void> {
    const rows = await this.db.routerModel.findMany();
    const next = new Map<string, CatalogModel>();
    for (const row of rows) {
      const previous = this.models.get(row.id);
      const model = this.toModel(row, previous);
      if (model) next.set(row.id, model);
    }
    this.models = next;
    this.refreshedAt = Date.now();
  }

  private toModel(row: RouterModel, previous: CatalogModel | undefined): CatalogModel | null {
    let schema: InputSchema;
    if (previous && previous.schema.text === row.inputSchemaText) {
      schema = previous.schema;
    } else {
      try {
        schema = compileInputSchema(row.inputSchemaText || JSON.stringify(row.inputSchema), `/v1/models/${row.id}`);
      } catch (err) {
        this.logger.warn(`model ${row.id} skipped: ${(err as Error).message}`);
        return null;
      }
    }
    return {
      id: row.id,
      provider: row.provider,
      model: row.model,
      adapterKind: row.adapterKind as AdapterKind,
      upstreamUrl: row.upstreamUrl,
      priceCents: row.priceCents,
      chargesOnPolicyRejection: row.chargesOnPolicyRejection,
      timeoutMs: row.timeoutMs,
      pollIntervalMs: row.pollIntervalMs,
      resultTypes: schema.resultTypes,
      schema,
    };
  }

  /** The model, from memory; a miss re-reads the database once in case it was just added. */
  async get(id: string): Promise<CatalogModel | undefined> {
    const found = this.models.get(id);
    if (found || Date.now() - this.refreshedAt < 250) return found;
    await this.refresh();
    return this.models.get(id);
  }

  ids(): string[] {
    return [...this.models.keys()];
  }

  /** One page in id order after `afterId`: keyset pagination, stable while the catalog changes. */
  async page(entitlements: readonly string[], afterId: string | null, limit: number): Promise<{ data: ModelListEntry[]; hasMore: boolean }> {
    const visible: Prisma.RouterModelWhereInput =
      entitlements.length === 0 || entitlements.includes('*')
        ? {}
        : {
            OR: [
              { id: { in: entitlements.filter((e) => !e.endsWith('/*')) } },
              { provider: { in: entitlements.filter((e) => e.endsWith('/*')).map((e) => e.slice(0, -2)) } },
            ],
          };
    const rows = await this.db.routerModel.findMany({
      where: { AND: [visible, afterId === null ? {} : { id: { gt: afterId } }] },
      orderBy: { id: 'asc' },
      take: limit + 1,
      select: { id: true, provider: true, model: true, chargesOnPolicyRejection: true },
    });
    const hasMore = rows.length > limit;
    return {
      hasMore,
      data: rows.slice(0, limit).map((r) => ({ id: r.id, provider: r.provider, model: r.model, billing: { charges_on_policy_rejection: r.chargesOnPolicyRejection } })),
    };
  }
}
