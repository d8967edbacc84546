import { Inject, Injectable } from '@nestjs/common';
import { notExpired, recordUploadedAsset } from '#libs/assets';
import { isUuid } from '#libs/contracts';
import type { Asset, Blob, Db, JobOutput } from '#libs/db';
import type { StoredBlob } from '#libs/storage';
import { DB } from '../../core/tokens.js';
import { parseFileValue, uploadName } from './file-names.js';

/** Tag of assets created through v1 uploads: their names make the file lists v1 clients see. */
export const V1_UPLOAD_TAG = 'v1-upload';

type LiveAsset = Asset & { blob: Blob };
type OutputRow = JobOutput & { asset: LiveAsset };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Where v1 file names meet the account's assets: uploads, outputs and the references of
 * `/api/view` and masks (the names workflows use are InputFiles'). Another account's files are
 * never found, exactly like missing ones.
 */
@Injectable()
export class V1Files {
  constructor(@Inject(DB) private readonly db: Db) {}

  /** Records an upload once per account and name; repeated uploads of the same bytes reuse it. */
  async recordUpload(accountId: string, stored: StoredBlob, extension: string, contentType: string): Promise<{ asset: Asset; name: string; created: boolean }> {
    const name = uploadName(stored.hash, extension);
    const existing = await this.db.asset.findFirst({
      where: { accountId, blobHash: stored.hash, filePath: name, tags: { has: V1_UPLOAD_TAG }, ...notExpired() },
    });
    if (existing) return { asset: existing, name, created: false };
    const asset = await recordUploadedAsset(this.db, stored, { accountId, filePath: name, contentType, tags: [V1_UPLOAD_TAG] });
    return { asset, name, created: true };
  }

  /** Any live asset of the account over these bytes (uploads, masks, outputs alike). */
  async findByHash(accountId: string, hash: string): Promise<LiveAsset | null> {
    return this.db.asset.findFirst({ where: { accountId, blobHash: hash, ...notExpired() }, include: { blob: true }, orderBy: { createdAt: 'asc' } });
  }

  async findOutput(accountId: string, jobId: string, name: string, type?: string): Promise<OutputRow | null> {
    return this.db.jobOutput.findFirst({
      where: { jobId, name, ...(type ? { engineType: type } : {}), job: { accountId }, asset: notExpired() },
      include: { asset: { include: { blob: true } } },
      orderBy: { id: 'asc' },
    });
  }

  /** The asset a `{filename, subfolder, type}` reference names, for `/api/view` and masks. */
  async findByReference(accountId: string, ref: { filename: string; subfolder?: string; type?: string }): Promise<{ asset: LiveAsset; name: string } | null> {
    const type = ref.type || 'input';
    const parsed = parseFileValue(ref.filename, type, type === 'input' ? undefined : (ref.subfolder ?? ''));
    if (!parsed) return null;
    if (parsed.kind === 'output') {
      const row = await this.findOutput(accountId, parsed.jobId, parsed.name, parsed.type);
      return row ? { asset: row.asset, name: row.name } : null;
    }
    const asset = await this.findByHash(accountId, parsed.hash);
    return asset ? { asset, name: ref.filename.split('/').pop()! } : null;
  }

  /** For queue and history: asset references shown again as the file names the client used. */
  async displayNames(workflows: unknown[]): Promise<Map<string, string>> {
    const ids = new Set<string>();
    for (const wf of workflows) {
      if (!isObject(wf)) continue;
      for (const node of Object.values(wf)) {
        if (!isObject(node) || !isObject(node.inputs)) continue;
        for (const v of Object.values(node.inputs)) if (isObject(v) && v.__type === 'core/ASSET' && isObject(v.info) && typeof v.info.id === 'string') ids.add(v.info.id);
      }
    }
    if (ids.size === 0) return new Map();
    const assets = await this.db.asset.findMany({ where: { id: { in: [...ids].filter(isUuid) } }, select: { id: true, blobHash: true, filePath: true, jobId: true } });
    const names = new Map<string, string>();
    for (const a of assets) {
      const base = a.filePath.split('/').pop() ?? a.filePath;
      const ext = /\.[a-z0-9]{1,10}$/i.exec(base)?.[0]?.toLowerCase() ?? '';
      names.set(a.id, a.jobId ? `${a.jobId}/${base} [output]` : parseFileValue(base)?.kind === 'upload' ? base : uploadName(a.blobHash, ext));
    }
    return names;
  }
}

/** A workflow with asset references replaced by the names from `displayNames`. */
export function withDisplayNames(workflow: unknown, names: Map<string, string>): unknown {
  if (!isObject(workflow) || names.size === 0) return workflow;
  const out: Record<string, unknown> = {};
  for (const [id, node] of Object.entries(workflow)) {
    if (!isObject(node) || !isObject(node.inputs)) {
      out[id] = node;
      continue;
    }
    const inputs: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node.inputs)) {
      const ref = isObject(v) && v.__type === 'core/ASSET' && isObject(v.info) ? names.get(String(v.info.id)) : undefined;
      inputs[k] = ref ?? v;
    }
    out[id] = { ...node, inputs };
  }
  return out;
}
