import { createHmac } from 'node:crypto';
import { link, mkdir, readdir, rm, rmdir, symlink, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '#libs/db';
import type { ApiPrompt, EngineClient } from '#libs/engine-protocol';
import { EMBEDDINGS_FOLDER, embeddingName, parseModelPath, renameEmbeddings } from '#libs/models';
import type { BlobStore } from '#libs/storage';
import type { NodeDefinitions } from '#libs/workflow';
import type { ModelCache } from './model-cache.js';

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

/**
 * The input under which the API attaches a tenant's embedding to the node whose text names it:
 * `cloud_embedding:<name as written>` → a reference to the embedding's asset. The engine never
 * sees it: staging replaces the name in the node's text and drops the input.
 */
export const EMBEDDING_INPUT_PREFIX = 'cloud_embedding:';

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
  /** The engine subfolder the files went into; null when the job staged nothing. */
  folder: string | null;
  /** Takes the job's model files back from the engine's model folders (and frees them in the cache). */
  release?: () => Promise<void>;
}

/**
 * Where a worker gives its engine a tenant's model files: the engine's `models` directory as the
 * worker sees it (a volume both mount), and the cache the files come from.
 */
export interface ModelStaging {
  cache: ModelCache;
  /** Empty: the engine's model folders are out of reach, and jobs naming a tenant's model fail. */
  modelsDir: string;
  /** The last job's files being taken back: the next job's staging waits for it. */
  releasing?: Promise<void>;
}

/**
 * The engine subfolder of an account's staged files. The engine's own file lists show only
 * the top of its input folder, and its name is keyed on a secret, so neither another tenant nor
 * anyone reading an engine listing can name what lies in it (the API refuses any file name that is
 * not the caller's anyway). One folder per account, not per job: the same bytes staged again keep
 * their name, so the engine's cache still serves a tenant's reruns.
 *
 * In the model folders the engine lists subfolders too: the worker filters every staging folder
 * out of what it reports (`withoutStagedNames`), and the folder is gone after each job.
 */
export function stagingFolder(secret: string, accountId: string): string {
  return `cloud-${createHmac('sha256', secret).update(`staging:${accountId}`).digest('hex').slice(0, 24)}`;
}

/** A name (or path) inside some account's staging folder, whoever's. */
const STAGED = /^cloud-[0-9a-f]{24}(?:[\\/]|$)/;

export function isStagedName(name: string): boolean {
  return STAGED.test(name);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function withoutStaged(list: unknown[]): unknown[] {
  return list.some((c) => typeof c === 'string' && isStagedName(c)) ? list.filter((c) => typeof c !== 'string' || !isStagedName(c)) : list;
}

/**
 * Definitions as the engine reported them, minus every staged file name in their choices. The
 * engine lists model folders recursively, so while a job runs its tenant's files show up there;
 * what the worker publishes must never carry them. Unchanged classes are shared, not copied.
 */
export function withoutStagedNames(defs: NodeDefinitions): NodeDefinitions {
  const out: NodeDefinitions = { ...defs };
  for (const [cls, def] of Object.entries(defs)) {
    let input = def.input;
    for (const section of ['required', 'optional'] as const) {
      const entries = def.input?.[section];
      if (!isObject(entries)) continue;
      let changed: Record<string, unknown> | null = null;
      for (const [name, entry] of Object.entries(entries)) {
        if (!Array.isArray(entry)) continue;
        let replaced: unknown[] | null = null;
        if (Array.isArray(entry[0])) {
          const kept = withoutStaged(entry[0]);
          if (kept !== entry[0]) replaced = [kept, ...entry.slice(1)];
        } else if (entry[0] === 'COMBO' && isObject(entry[1]) && Array.isArray(entry[1].options)) {
          const kept = withoutStaged(entry[1].options);
          if (kept !== entry[1].options) replaced = ['COMBO', { ...entry[1], options: kept }, ...entry.slice(2)];
        }
        if (replaced) (changed ??= { ...entries })[name] = replaced;
      }
      if (changed) input = { ...input, [section]: changed };
    }
    if (input !== def.input) out[cls] = { ...def, input };
  }
  return out;
}

/** A list of file names (a model folder's, the embeddings) without staged ones. */
export function withoutStagedFiles(names: string[]): string[] {
  return names.filter((n) => !isStagedName(n));
}

interface StagedModel {
  /** The name the engine knows the file by inside its folder: `<staging folder>/<hash prefix>/<tenant's name>`. */
  engineName: string;
  folder: string;
}

/**
 * Copies each referenced input asset into the engine's input folder (under the account's staging
 * folder) and gives the engine each referenced model file (see `stageModels`), then rewrites each
 * reference to the file name the engine has it under. Names are derived from the content hash, so
 * re-staging the same bytes is harmless and two assets never collide.
 *
 * `submitted` is the workflow as the tenant sent it: where it names a file, that name is what the
 * tenant sees in place of the engine's; elsewhere the asset's own file path (a model's name) is.
 */
export async function stageInputs(
  workflow: ApiWorkflow,
  submitted: ApiWorkflow | null,
  accountId: string,
  folder: string,
  db: Db,
  store: BlobStore,
  engine: EngineClient,
  models: ModelStaging | null = null,
): Promise<StagedInputs> {
  const ids = referencedAssetIds(workflow);
  if (ids.length === 0) return { workflow, tenantNames: new Map(), folder: null };
  // The engine holds no other job's files when this one's go in.
  const [assets] = await Promise.all([db.asset.findMany({ where: { id: { in: ids }, accountId } }), models?.releasing]);
  const byId = new Map(assets.map((a) => [a.id, a]));
  const missing = ids.find((id) => !byId.has(id));
  if (missing) throw new StagingError(`Input asset ${missing} is no longer available.`);
  const tenantNames = new Map<string, string>();
  const engineName = new Map<string, string>();
  const modelAssets = assets.filter((a) => parseModelPath(a.filePath) !== null);
  // A blob's size is read only to fetch it into the cache: a cached model costs no query.
  const sizeOf = (hash: string) => async () => {
    const blob = await db.blob.findUnique({ where: { hash }, select: { sizeBytes: true } });
    if (!blob) throw new StagingError('A model file of the job is no longer available.');
    return Number(blob.sizeBytes);
  };
  const staged = modelAssets.length > 0 ? await stageModels(modelAssets, folder, models, sizeOf) : null;
  try {
    for (const asset of assets) {
      const model = staged?.files.get(asset.id);
      if (model) {
        engineName.set(asset.id, model.engineName);
        const name = parseModelPath(asset.filePath)!.name;
        tenantNames.set(model.engineName, name);
        // Prompts and the engine's messages name embeddings without their extension too.
        if (model.folder === EMBEDDINGS_FOLDER) tenantNames.set(embeddingName(model.engineName), embeddingName(name));
        continue;
      }
      const ext = path.extname(asset.filePath).toLowerCase().replace(/[^.a-z0-9]/g, '') || '.bin';
      const uploaded = await engine.uploadImage(await store.read(asset.blobHash), `${asset.blobHash.slice(0, 32)}${ext}`, {
        type: 'input',
        subfolder: folder,
        overwrite: true,
        contentType: asset.contentType,
      });
      engineName.set(asset.id, uploaded.subfolder ? `${uploaded.subfolder}/${uploaded.name}` : uploaded.name);
    }
    const rewritten: ApiWorkflow = {};
    for (const [nodeId, node] of Object.entries(workflow)) {
      const inputs: Record<string, unknown> = {};
      const embeddings = new Map<string, string>();
      for (const [name, value] of Object.entries(node.inputs ?? {})) {
        if (!isAssetRef(value)) {
          inputs[name] = value;
          continue;
        }
        const engineFile = engineName.get(value.info.id)!;
        if (name.startsWith(EMBEDDING_INPUT_PREFIX)) {
          if (staged?.files.get(value.info.id)?.folder !== EMBEDDINGS_FOLDER) throw new StagingError(`Asset ${value.info.id} is not an embedding.`);
          embeddings.set(name.slice(EMBEDDING_INPUT_PREFIX.length), engineFile);
          continue;
        }
        inputs[name] = engineFile;
        const sent = submitted?.[nodeId]?.inputs?.[name];
        if (!tenantNames.has(engineFile)) tenantNames.set(engineFile, typeof sent === 'string' ? sent : byId.get(value.info.id)!.filePath);
      }
      // The tenant's embeddings by the names the engine has them under, in this node's own texts.
      if (embeddings.size > 0) {
        for (const [name, value] of Object.entries(inputs)) {
          if (typeof value === 'string') inputs[name] = renameEmbeddings(value, (candidate) => embeddings.get(candidate) ?? null);
        }
      }
      rewritten[nodeId] = { ...node, inputs };
    }
    const release = staged ? () => (models!.releasing = staged.release().catch(() => undefined)) : undefined;
    return { workflow: rewritten, tenantNames, folder, release };
  } catch (err) {
    await staged?.release();
    throw err;
  }
}

/**
 * Gives the engine a job's model files: each comes from the worker's cache (downloaded once,
 * verified) and is hard-linked into the engine's model folder, under the account's staging folder
 * and the first 16 hex digits of its hash, so the engine finds it as
 * `cloud-<secret>/<hash>/styles/ink.safetensors`. The engine keys its in-memory model cache on that
 * name: no other tenant's job can name it, and other bytes under the tenant's same name get
 * another one, so the engine never serves one file's weights for another. Where the cache and the
 * engine's folder lie on different file systems, a symbolic link is made instead (the engine must
 * then see the cache at the same path).
 */
async function stageModels(
  assets: Array<{ id: string; filePath: string; blobHash: string }>,
  folder: string,
  models: ModelStaging | null,
  sizeOf: (hash: string) => () => Promise<number>,
): Promise<{ files: Map<string, StagedModel>; release: () => Promise<void> }> {
  if (!models?.modelsDir) {
    throw new StagingError('This service cannot give its engines tenant model files (the worker has no ENGINE_MODELS_DIR); the job cannot run here.', 'models_unavailable');
  }
  const held: Array<{ release(): void }> = [];
  const linked: Array<{ target: string; top: string }> = [];
  // Each link, then its folders up to the model folder while they are empty: a few calls, not a tree walk.
  const release = async () => {
    for (const { target, top } of linked) {
      await unlink(target).catch(() => undefined);
      for (let dir = path.dirname(target); dir.startsWith(top) && dir !== top; dir = path.dirname(dir)) {
        if (!(await rmdir(dir).then(() => true, () => false))) break;
      }
    }
    for (const h of held) h.release();
  };
  try {
    const files = new Map<string, StagedModel>();
    for (const asset of assets) {
      const { folder: modelFolder, name } = parseModelPath(asset.filePath)!;
      const cached = await models.cache.acquire(asset.blobHash, sizeOf(asset.blobHash));
      held.push(cached);
      const engineName = `${folder}/${asset.blobHash.slice(0, 16)}/${name}`;
      const target = path.join(models.modelsDir, modelFolder, engineName);
      await mkdir(path.dirname(target), { recursive: true });
      const made = await link(cached.path, target).then(
        () => true,
        async (err: NodeJS.ErrnoException) => {
          if (err.code === 'EEXIST') return false;
          if (err.code !== 'EXDEV' && err.code !== 'EPERM') throw err;
          await symlink(cached.path, target);
          return true;
        },
      );
      if (made) linked.push({ target, top: path.join(models.modelsDir, modelFolder) });
      files.set(asset.id, { engineName, folder: modelFolder });
    }
    return { files, release };
  } catch (err) {
    await release().catch(() => undefined);
    throw err;
  }
}

/**
 * Removes every account's staging folder from the engine's model folders: what a worker that died
 * mid-job left there, removed when the worker starts (one worker drives one engine, and its
 * models directory is its engine's alone).
 */
export async function removeStagingFolders(modelsDir: string): Promise<void> {
  if (!modelsDir) return;
  const folders = await readdir(modelsDir).catch(() => [] as string[]);
  for (const f of folders) {
    const entries = await readdir(path.join(modelsDir, f)).catch(() => [] as string[]);
    for (const e of entries) if (isStagedName(e)) await rm(path.join(modelsDir, f, e), { recursive: true, force: true });
  }
}

/**
 * Removes a job's staged files from the engine: its model files always, its inputs when the worker
 * can reach the engine's input folder (a volume shared with the engine; the engine has no route
 * that deletes an input file).
 */
export async function removeStagedInputs(engineInputDir: string, staged: StagedInputs): Promise<void> {
  // Not waited for: the job's end need not wait on it, and the engine runs nothing else before
  // the next job's staging, which waits for it (ModelStaging.releasing).
  void staged.release?.();
  if (!engineInputDir || !staged.folder) return;
  await rm(path.join(engineInputDir, staged.folder), { recursive: true, force: true });
}

export class StagingError extends Error {
  constructor(
    message: string,
    /** The job's error code. */
    readonly code: 'missing_asset' | 'models_unavailable' = 'missing_asset',
  ) {
    super(message);
  }
}
