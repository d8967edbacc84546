import { createHmac } from 'node:crypto';
import { rm } from 'node:fs/promises';
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

/** A job's inputs as the engine has them. */
export interface StagedInputs {
  /** The workflow the engine runs: asset references replaced by the engine's file names. */
  workflow: ApiWorkflow;
  /** Each staged file's engine name (`folder/name`) and the name the tenant knows it by. */
  tenantNames: Map<string, string>;
  /** The engine input subfolder the files went into; null when the job staged nothing. */
  folder: string | null;
}

/**
 * The engine input subfolder of an account's staged files. The engine's own file lists show only
 * the top of its input folder, and its name is keyed on a secret, so neither another tenant nor
 * anyone reading an engine listing can name what lies in it (the API refuses any file name that is
 * not the caller's anyway). One folder per account, not per job: the same bytes staged again keep
 * their name, so the engine's cache still serves a tenant's reruns.
 */
export function stagingFolder(secret: string, accountId: string): string {
  return `cloud-${createHmac('sha256', secret).update(`staging:${accountId}`).digest('hex').slice(0, 24)}`;
}

/**
 * Copies each referenced asset into the engine's input folder (under the account's staging folder)
 * and rewrites the reference to the file name the engine gave it. Names are derived from the
 * content hash, so re-staging the same bytes is harmless and two assets never collide.
 *
 * `submitted` is the workflow as the tenant sent it: where it names a file, that name is what the
 * tenant sees in place of the engine's; elsewhere the asset's own file path is.
 */
export async function stageInputs(
  workflow: ApiWorkflow,
  submitted: ApiWorkflow | null,
  accountId: string,
  folder: string,
  db: Db,
  store: BlobStore,
  engine: EngineClient,
): Promise<StagedInputs> {
  const ids = referencedAssetIds(workflow);
  if (ids.length === 0) return { workflow, tenantNames: new Map(), folder: null };
  const assets = await db.asset.findMany({ where: { id: { in: ids }, accountId } });
  const byId = new Map(assets.map((a) => [a.id, a]));
  const engineName = new Map<string, string>();
  for (const id of ids) {
    const asset = byId.get(id);
    if (!asset) throw new StagingError(`Input asset ${id} is no longer available.`);
    const ext = path.extname(asset.filePath).toLowerCase().replace(/[^.a-z0-9]/g, '') || '.bin';
    const uploaded = await engine.uploadImage(await store.read(asset.blobHash), `${asset.blobHash.slice(0, 32)}${ext}`, {
      type: 'input',
      subfolder: folder,
      overwrite: true,
      contentType: asset.contentType,
    });
    engineName.set(id, uploaded.subfolder ? `${uploaded.subfolder}/${uploaded.name}` : uploaded.name);
  }
  const tenantNames = new Map<string, string>();
  const staged: ApiWorkflow = {};
  for (const [nodeId, node] of Object.entries(workflow)) {
    const inputs: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(node.inputs ?? {})) {
      if (!isAssetRef(value)) {
        inputs[name] = value;
        continue;
      }
      const engineFile = engineName.get(value.info.id)!;
      inputs[name] = engineFile;
      const sent = submitted?.[nodeId]?.inputs?.[name];
      if (!tenantNames.has(engineFile)) tenantNames.set(engineFile, typeof sent === 'string' ? sent : byId.get(value.info.id)!.filePath);
    }
    staged[nodeId] = { ...node, inputs };
  }
  return { workflow: staged, tenantNames, folder };
}

/**
 * Removes a job's staged inputs from the engine's input folder, when the worker can reach it (a
 * volume shared with the engine). The engine has no route that deletes an input file.
 */
export async function removeStagedInputs(engineInputDir: string, staged: StagedInputs): Promise<void> {
  if (!engineInputDir || !staged.folder) return;
  await rm(path.join(engineInputDir, staged.folder), { recursive: true, force: true });
}

export class StagingError extends Error {}
