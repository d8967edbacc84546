import { Inject, Injectable } from '@nestjs/common';
import { notExpired, recordUploadedAsset } from '#libs/assets';
import type { Asset, Blob, Db, JobOutput } from '#libs/db';
import type { StoredBlob } from '#libs/storage';
import type { ApiWorkflow, NodeDefinition, NodeDefinitions } from '#libs/workflow';
import { DB } from '../../core/tokens.js';
import { parseFileValue, uploadName, type FileRef } from './file-names.js';

/** Tag of assets created through v1 uploads: their names make the file lists v1 clients see. */
export const V1_UPLOAD_TAG = 'v1-upload';
const MAX_LISTED = 1000;
const UPLOAD_FLAGS = ['image_upload', 'audio_upload', 'video_upload', 'upload', 'image_folder'];

type LiveAsset = Asset & { blob: Blob };
type OutputRow = JobOutput & { asset: LiveAsset };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `[type, options]` of one input definition, and whether it names a file the user supplies. */
function fileInput(entry: unknown): { combo: boolean; upload: boolean } {
  if (!Array.isArray(entry)) return { combo: false, upload: false };
  const options = isObject(entry[1]) ? entry[1] : {};
  return { combo: Array.isArray(entry[0]) || entry[0] === 'COMBO', upload: UPLOAD_FLAGS.some((f) => options[f] !== undefined && options[f] !== false) };
}

function withChoices(entry: unknown[], names: string[]): unknown[] {
  const options = isObject(entry[1]) ? entry[1] : {};
  if (entry[0] === 'COMBO') return ['COMBO', { ...options, options: names }, ...entry.slice(2)];
  return [names, ...entry.slice(1)];
}

/**
 * Where v1 file names meet the account's assets: uploads, outputs, the per-account file lists
 * of `/object_info`, and the rewriting of file names in prompts into asset references (which the
 * worker stages into the engine). Another account's files are never found, exactly like missing ones.
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

  /** The names of the account's v1 uploads, newest first: its "input folder". */
  async uploadedNames(accountId: string): Promise<string[]> {
    const rows = await this.db.asset.findMany({
      where: { accountId, tags: { has: V1_UPLOAD_TAG }, ...notExpired() },
      select: { filePath: true },
      orderBy: { createdAt: 'desc' },
      take: MAX_LISTED,
    });
    return [...new Set(rows.map((r) => r.filePath))];
  }

  /**
   * The engine's node definitions as this account sees them: file inputs list the account's own
   * uploads instead of what happens to lie in some engine's input folder.
   */
  accountDefinitions(defs: NodeDefinitions, names: string[]): NodeDefinitions {
    const out: NodeDefinitions = { ...defs };
    for (const [cls, def] of Object.entries(defs)) {
      let input: NonNullable<NodeDefinition['input']> | null = null;
      for (const section of ['required', 'optional'] as const) {
        const inputs = def.input?.[section];
        if (!isObject(inputs) || !Object.values(inputs).some((e) => fileInput(e).upload)) continue;
        const replaced: Record<string, unknown> = {};
        for (const [name, entry] of Object.entries(inputs)) replaced[name] = fileInput(entry).upload ? withChoices(entry as unknown[], names) : entry;
        input = { ...(input ?? def.input), [section]: replaced };
      }
      if (input) out[cls] = { ...def, input };
    }
    return out;
  }

  /**
   * File names in file inputs (and `<hash>.<ext>` values in any list input) that name the
   * account's own files become asset references. Names it does not own stay as they are, so
   * validation against `accountDefinitions` reports them as the engine would: not in the list.
   */
  async resolveWorkflow(accountId: string, workflow: unknown, defs: NodeDefinitions): Promise<unknown> {
    if (!isObject(workflow)) return workflow;
    const wanted: Array<{ nodeId: string; input: string; ref: FileRef }> = [];
    for (const [nodeId, node] of Object.entries(workflow)) {
      if (!isObject(node) || typeof node.class_type !== 'string' || !isObject(node.inputs)) continue;
      const def = Object.hasOwn(defs, node.class_type) ? defs[node.class_type] : undefined;
      if (!def) continue;
      for (const [input, value] of Object.entries(node.inputs)) {
        if (typeof value !== 'string') continue;
        const entry = def.input?.required?.[input] ?? def.input?.optional?.[input];
        const kind = fileInput(entry);
        if (!kind.combo && !kind.upload) continue;
        const ref = parseFileValue(value);
        if (ref) wanted.push({ nodeId, input, ref });
      }
    }
    if (wanted.length === 0) return workflow;
    const hashes = [...new Set(wanted.flatMap((w) => (w.ref.kind === 'upload' ? [w.ref.hash] : [])))];
    const byHash = new Map<string, string>();
    if (hashes.length > 0) {
      const assets = await this.db.asset.findMany({ where: { accountId, blobHash: { in: hashes }, ...notExpired() }, select: { id: true, blobHash: true }, orderBy: { createdAt: 'asc' } });
      for (const a of assets) if (!byHash.has(a.blobHash)) byHash.set(a.blobHash, a.id);
    }
    const resolved = structuredClone(workflow) as ApiWorkflow;
    for (const w of wanted) {
      let assetId: string | undefined;
      if (w.ref.kind === 'upload') assetId = byHash.get(w.ref.hash);
      else assetId = (await this.findOutput(accountId, w.ref.jobId, w.ref.name, w.ref.type))?.assetId;
      if (assetId) resolved[w.nodeId]!.inputs[w.input] = { __type: 'core/ASSET', info: { id: assetId } };
    }
    return resolved;
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
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
    const assets = await this.db.asset.findMany({ where: { id: { in: [...ids].filter((i) => uuid.test(i)) } }, select: { id: true, blobHash: true, filePath: true, jobId: true } });
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
