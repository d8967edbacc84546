import { notExpired } from '#libs/assets';
import type { Db } from '#libs/db';
import { EMBEDDINGS_FOLDER, MODELS_PREFIX, embeddingName, parseModelPath } from '#libs/models';

/** How many of an account's model files its lists and definitions show. */
const MAX_LISTED = 1000;

export interface TenantModel {
  assetId: string;
  folder: string;
  name: string;
}

/** An account's model files, one per folder and name: the newest asset under each path wins. */
export class TenantModels {
  private readonly byFolder = new Map<string, Map<string, TenantModel>>();

  constructor(readonly list: TenantModel[]) {
    for (const m of list) {
      let names = this.byFolder.get(m.folder);
      if (!names) this.byFolder.set(m.folder, (names = new Map()));
      if (!names.has(m.name)) names.set(m.name, m);
    }
  }

  get empty(): boolean {
    return this.list.length === 0;
  }

  /** The folder's names, sorted as the engine sorts its lists. */
  names(folder: string): string[] {
    return [...(this.byFolder.get(folder)?.keys() ?? [])].sort();
  }

  find(folder: string, name: string): TenantModel | null {
    return this.byFolder.get(folder)?.get(name) ?? null;
  }

  folders(): string[] {
    return [...this.byFolder.keys()];
  }

  /** Embedding names as `/embeddings` lists them: without their extension. */
  embeddingNames(): string[] {
    return [...new Set(this.names(EMBEDDINGS_FOLDER).map(embeddingName))].sort();
  }
}

/** The account's live model files (`models/<folder>/<name>` uploads), newest first. */
export async function tenantModels(db: Db, accountId: string): Promise<TenantModels> {
  const rows = await db.asset.findMany({
    where: { accountId, jobId: null, filePath: { startsWith: MODELS_PREFIX }, ...notExpired() },
    select: { id: true, filePath: true },
    orderBy: { createdAt: 'desc' },
    take: MAX_LISTED,
  });
  const list: TenantModel[] = [];
  for (const row of rows) {
    const parsed = parseModelPath(row.filePath);
    if (parsed) list.push({ assetId: row.id, ...parsed });
  }
  return new TenantModels(list);
}
