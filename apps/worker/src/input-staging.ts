import path from 'node:path';
import type { Db } from '#libs/db';
import type { ApiPrompt, EngineClient } from '#libs/engine-protocol';
import type { BlobStore } from '#libs/storage';

export type ApiWorkflow = ApiPrompt;

interface AssetRef {
  __type: 'core/ASSET';
  info: { id: string };
}

export function isAssetRef(value: unknown): value is AssetRef {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as { __type?: unknown; info?: { id?: unknown } };
  return v.__type === 'core/ASSET' && typeof v.info?.id === 'string';
}

/** Asset ids a workflow references, in order of appearance. */
export function referencedAssetIds(workflow: ApiWorkflow): string[] {
  const ids = new Set<string>();
  for (const node of Object.values(workflow)) {
    for (const value of Object.values(node.inputs ?? {})) if (isAssetRef(value)) ids.add(value.info.id);
  }
  return [...ids];
}

/**
 * Copies each referenced asset into the engine's input folder and rewrites the reference to the
 * file name the engine gave it. Names are derived from the content hash, so re-staging the same
 * bytes is harmless and two assets never collide.
 */
export async function stageInputs(
  workflow: ApiWorkflow,
  accountId: string,
  db: Db,
  store: BlobStore,
  engine: EngineClient,
): Promise<ApiWorkflow> {
  const ids = referencedAssetIds(workflow);
  if (ids.length === 0) return workflow;
  const assets = await db.asset.findMany({ where: { id: { in: ids }, accountId } });
  const byId = new Map(assets.map((a) => [a.id, a]));
  const engineName = new Map<string, string>();
  for (const id of ids) {
    const asset = byId.get(id);
    if (!asset) throw new StagingError(`Input asset ${id} is no longer available.`);
    const ext = path.extname(asset.filePath).toLowerCase().replace(/[^.a-z0-9]/g, '') || '.bin';
    const uploaded = await engine.uploadImage(await store.read(asset.blobHash), `${asset.blobHash.slice(0, 32)}${ext}`, {
      type: 'input',
      overwrite: true,
      contentType: asset.contentType,
    });
    engineName.set(id, uploaded.subfolder ? `${uploaded.subfolder}/${uploaded.name}` : uploaded.name);
  }
  const staged: ApiWorkflow = {};
  for (const [nodeId, node] of Object.entries(workflow)) {
    const inputs: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(node.inputs ?? {})) inputs[name] = isAssetRef(value) ? engineName.get(value.info.id) : value;
    staged[nodeId] = { ...node, inputs };
  }
  return staged;
}

export class StagingError extends Error {}
