import { Inject, Injectable } from '@nestjs/common';
import { notExpired } from '#libs/assets';
import { isStorableText } from '#libs/contracts';
import type { Db } from '#libs/db';
import type { EngineModels, EngineReportCache } from '#libs/jobs';
import { EMBEDDINGS_FOLDER, MODELS_PREFIX, embeddingMentions, matchEmbedding, modelFilePath, parseModelPath } from '#libs/models';
import { isAssetRef, type ApiWorkflow, type NodeDefinitions } from '#libs/workflow';
import { DB } from '../core/tokens.js';
import { ENGINE_MODELS } from '../jobs/job-system.providers.js';
import { parseFileValue } from '../v1/files/file-names.js';
import { fileKind, fileValues, inputEntry, withFileChoices, type FileKind } from './file-inputs.js';
import { tenantModels, TenantModels } from './model-files.js';
import { ModelInputs } from './model-inputs.js';

const MAX_LISTED = 1000;

/**
 * The input under which a tenant's embedding rides along with the node whose text names it
 * (`cloud_embedding:<name as written>` → the embedding's asset); the worker renames the embedding
 * in that node's text and drops the input. Clients cannot set such inputs themselves.
 */
const EMBEDDING_INPUT_PREFIX = 'cloud_embedding:';

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isStringInput(entry: unknown): boolean {
  return Array.isArray(entry) && entry[0] === 'STRING';
}

/** The annotation a front end may add to a name from the input folder (`photo.png [input]`). */
const INPUT_ANNOTATION = / \[input\]$/;

type Listed = { filePath: string; contentType: string };

function fitsKind(contentType: string, kind: FileKind): boolean {
  const type = contentType.toLowerCase();
  if (kind === 'image') return type.startsWith('image/');
  // As the engine's LoadAudio lists them: audio files and videos (it decodes their sound).
  if (kind === 'audio') return type.startsWith('audio/') || type.startsWith('video/');
  if (kind === 'video') return type.startsWith('video/');
  return true;
}

/**
 * A tenant's input files as workflows name them, on both surfaces: its uploads by their
 * `file_path` (v1 uploads by the name the upload answered, which is theirs), its earlier outputs
 * by `<job id>/<name> [output]`, and any of its files by `<blake3>.<ext>`. A name resolves only to
 * the caller's own files; another tenant's name, or a file that only lies in some engine's input
 * folder, fails exactly like a name that exists nowhere.
 *
 * Its model files (`models/<folder>/<name>` uploads) join the engines' shared models in the model
 * inputs (`ckpt_name`, `lora_name`, …) for this tenant only, and `embedding:<name>` in its prompts;
 * a name that is both a shared model and one of the tenant's resolves to the tenant's.
 */
@Injectable()
export class InputFiles {
  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(ENGINE_MODELS) private readonly modelReports: EngineReportCache<EngineModels>,
  ) {}

  /** The account's model files (its uploads under `models/<folder>/`). */
  models(accountId: string): Promise<TenantModels> {
    return tenantModels(this.db, accountId);
  }

  /** The engines' model folders and files as last reported; null until one has. */
  engineModels(): Promise<EngineModels | null> {
    return this.modelReports.get();
  }

  private async modelInputs(defs: NodeDefinitions): Promise<ModelInputs> {
    return ModelInputs.of(defs, await this.engineModels());
  }

  /** The node definitions as this account sees them: its own files in every file input, its models beside the shared ones. */
  async definitionsFor(accountId: string, defs: NodeDefinitions): Promise<NodeDefinitions> {
    const [uploads, outputs, models, modelInputs] = await Promise.all([this.uploads(accountId), this.outputNames(accountId), this.models(accountId), this.modelInputs(defs)]);
    const byKind = new Map<FileKind, string[]>();
    const choices = (kind: FileKind): string[] => {
      let names = byKind.get(kind);
      if (!names) {
        names = kind === 'output-image' ? outputs : [...new Set(uploads.filter((u) => fitsKind(u.contentType, kind)).map((u) => u.filePath))];
        byKind.set(kind, names);
      }
      return names;
    };
    return withModelChoices(withFileChoices(defs, choices), modelInputs, models);
  }

  /** The names of the account's input files, newest first: its "input folder". */
  async inputNames(accountId: string): Promise<string[]> {
    return [...new Set((await this.uploads(accountId)).map((u) => u.filePath))];
  }

  /** The account's uploads, newest first. */
  private async uploads(accountId: string): Promise<Listed[]> {
    return this.db.asset.findMany({
      where: { accountId, jobId: null, NOT: { filePath: { startsWith: MODELS_PREFIX } }, ...notExpired() },
      select: { filePath: true, contentType: true },
      orderBy: { createdAt: 'desc' },
      take: MAX_LISTED,
    });
  }

  /** The account's image outputs, newest first, as the engine's output-folder inputs name them. */
  private async outputNames(accountId: string): Promise<string[]> {
    const rows = await this.db.jobOutput.findMany({
      where: { type: 'image', job: { accountId }, asset: notExpired() },
      select: { jobId: true, name: true },
      orderBy: { id: 'desc' },
      take: MAX_LISTED,
    });
    return rows.map((r) => `${r.jobId}/${r.name} [output]`);
  }

  /**
   * The workflow with each file name of the account's own files replaced by a reference to that
   * asset (the worker stages referenced assets into its engine). Names that are not the account's
   * stay as they are, so validation reports them as the engine would: not in the list. Returns the
   * same object when nothing was replaced; otherwise a copy (the nodes it changed are new objects).
   *
   * Model inputs take the account's model files of their folder by name (before a shared model of
   * the same name), or by a reference to such an asset; a reference to any other asset of the
   * account becomes its file path there, which validation refuses as not in the list. Each
   * `embedding:<name>` of a text that names one of the account's embeddings gets its asset attached
   * to the node (EMBEDDING_INPUT_PREFIX).
   */
  async resolve(accountId: string, workflow: unknown, defs: NodeDefinitions): Promise<unknown> {
    if (!isObject(workflow)) return workflow;
    let resolved: ApiWorkflow | null = null;
    const replace = (nodeId: string, change: (inputs: Record<string, unknown>) => void) => {
      resolved ??= { ...(workflow as ApiWorkflow) };
      const node = resolved[nodeId]!;
      const inputs = { ...node.inputs };
      change(inputs);
      resolved[nodeId] = { ...node, inputs };
    };
    const asRef = (id: string) => ({ __type: 'core/ASSET', info: { id } });

    // Inputs only the service sets.
    for (const [nodeId, node] of Object.entries(workflow)) {
      if (!isObject(node) || !isObject(node.inputs)) continue;
      const reserved = Object.keys(node.inputs).filter((k) => k.startsWith(EMBEDDING_INPUT_PREFIX));
      if (reserved.length > 0) replace(nodeId, (inputs) => reserved.forEach((k) => delete inputs[k]));
    }

    // A name PostgreSQL cannot hold (a NUL) is no file of anyone's: validation refuses it.
    const wanted = fileValues(workflow, defs).filter((w) => isStorableText(w.value));
    const modelInputs = await this.modelInputs(defs);
    const refs = wanted.map((w) => {
      const ref = parseFileValue(w.value);
      // A plain name stands only in a file input; list inputs of the engine's own files (models)
      // keep their names, unless they name one of the account's model files.
      const plain = !ref && w.kind !== null ? w.value.replace(INPUT_ANNOTATION, '') : null;
      const cls = (workflow[w.nodeId] as { class_type: string }).class_type;
      const folder = w.kind === null ? modelInputs.folderOf(cls, w.input) : null;
      return { ...w, ref, plain, model: folder ? modelFilePath(folder, w.value) : null };
    });
    const hashes = [...new Set(refs.flatMap((r) => (r.ref?.kind === 'upload' ? [r.ref.hash] : [])))];
    const names = [...new Set(refs.flatMap((r) => (r.plain !== null ? [r.plain] : r.model !== null ? [r.model] : [])))];
    const [byHash, byName] = await Promise.all([this.assetsByHash(accountId, hashes), this.assetsByName(accountId, names)]);
    for (const r of refs) {
      // The account's model file of this name comes before any shared model.
      let assetId = r.model !== null ? byName.get(r.model) : undefined;
      if (assetId === undefined) {
        if (r.ref?.kind === 'upload') assetId = byHash.get(r.ref.hash);
        else if (r.ref?.kind === 'output') assetId = (await this.outputAsset(accountId, r.ref.jobId, r.ref.name, r.ref.type)) ?? undefined;
        else if (r.plain !== null) assetId = byName.get(r.plain);
      }
      if (!assetId) continue;
      replace(r.nodeId, (inputs) => (inputs[r.input] = asRef(assetId)));
    }
    await this.checkModelRefs(accountId, resolved ?? (workflow as ApiWorkflow), defs, modelInputs, replace);
    await this.attachEmbeddings(accountId, resolved ?? (workflow as ApiWorkflow), defs, replace);
    return resolved ?? workflow;
  }

  /**
   * References the client put in a model input must be the account's model files of that folder,
   * and its model files stand in no file input: any other asset of the account becomes its file
   * path there (not in the list). Another account's asset is left for the submission's check,
   * which refuses it as missing.
   */
  private async checkModelRefs(accountId: string, workflow: ApiWorkflow, defs: NodeDefinitions, modelInputs: ModelInputs, replace: (nodeId: string, change: (inputs: Record<string, unknown>) => void) => void): Promise<void> {
    const slots: Array<{ nodeId: string; input: string; id: string; folder: string | null }> = [];
    for (const [nodeId, node] of Object.entries(workflow)) {
      if (!isObject(node) || typeof node.class_type !== 'string' || !isObject(node.inputs)) continue;
      const def = Object.hasOwn(defs, node.class_type) ? defs[node.class_type] : undefined;
      for (const [input, value] of Object.entries(node.inputs)) {
        if (!isAssetRef(value)) continue;
        const folder = modelInputs.folderOf(node.class_type, input);
        if (folder || fileKind(inputEntry(def, input)) !== null) slots.push({ nodeId, input, id: value.info.id, folder });
      }
    }
    if (slots.length === 0) return;
    const ids = [...new Set(slots.map((s) => s.id.toLowerCase()))].filter((id) => /^[0-9a-f-]{36}$/.test(id));
    const rows = ids.length > 0 ? await this.db.asset.findMany({ where: { id: { in: ids }, accountId, ...notExpired() }, select: { id: true, filePath: true } }) : [];
    const paths = new Map(rows.map((r) => [r.id, r.filePath]));
    for (const slot of slots) {
      const filePath = paths.get(slot.id.toLowerCase());
      if (filePath === undefined) continue;
      const model = parseModelPath(filePath);
      const fits = slot.folder ? model?.folder === slot.folder : model === null;
      if (!fits) replace(slot.nodeId, (inputs) => (inputs[slot.input] = filePath));
    }
  }

  /** Attaches the account's embeddings that texts of the workflow name to the nodes holding those texts. */
  private async attachEmbeddings(accountId: string, workflow: ApiWorkflow, defs: NodeDefinitions, replace: (nodeId: string, change: (inputs: Record<string, unknown>) => void) => void): Promise<void> {
    const mentions: Array<{ nodeId: string; candidates: string[] }> = [];
    for (const [nodeId, node] of Object.entries(workflow)) {
      if (!isObject(node) || typeof node.class_type !== 'string' || !isObject(node.inputs)) continue;
      const def = Object.hasOwn(defs, node.class_type) ? defs[node.class_type] : undefined;
      for (const [input, value] of Object.entries(node.inputs)) {
        if (typeof value !== 'string' || !isStringInput(inputEntry(def, input))) continue;
        for (const m of embeddingMentions(value)) mentions.push({ nodeId, candidates: m.candidates });
      }
    }
    if (mentions.length === 0) return;
    const embeddings = await this.embeddings(accountId);
    if (embeddings.size === 0) return;
    const names = [...embeddings.keys()];
    const attach = new Map<string, Map<string, string>>();
    for (const m of mentions) {
      for (const candidate of m.candidates) {
        const file = matchEmbedding(candidate, names);
        if (!file) continue;
        let forNode = attach.get(m.nodeId);
        if (!forNode) attach.set(m.nodeId, (forNode = new Map()));
        forNode.set(candidate, embeddings.get(file)!);
        break;
      }
    }
    for (const [nodeId, found] of attach) {
      replace(nodeId, (inputs) => {
        for (const [candidate, assetId] of found) inputs[`${EMBEDDING_INPUT_PREFIX}${candidate}`] = { __type: 'core/ASSET', info: { id: assetId } };
      });
    }
  }

  /** The account's embeddings: file name (subfolders kept) → the newest asset under it. */
  private async embeddings(accountId: string): Promise<Map<string, string>> {
    const prefix = `${MODELS_PREFIX}${EMBEDDINGS_FOLDER}/`;
    const rows = await this.db.asset.findMany({
      where: { accountId, jobId: null, filePath: { startsWith: prefix }, ...notExpired() },
      select: { id: true, filePath: true },
      orderBy: { createdAt: 'desc' },
      take: MAX_LISTED,
    });
    const found = new Map<string, string>();
    for (const r of rows) {
      const name = r.filePath.slice(prefix.length);
      if (name && !found.has(name)) found.set(name, r.id);
    }
    return found;
  }

  /** The oldest live asset of the account over each of these blobs. */
  private async assetsByHash(accountId: string, hashes: string[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    if (hashes.length === 0) return found;
    const rows = await this.db.asset.findMany({ where: { accountId, blobHash: { in: hashes }, ...notExpired() }, select: { id: true, blobHash: true }, orderBy: { createdAt: 'asc' } });
    for (const a of rows) if (!found.has(a.blobHash)) found.set(a.blobHash, a.id);
    return found;
  }

  /** The newest upload of the account under each of these names. */
  private async assetsByName(accountId: string, names: string[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    if (names.length === 0) return found;
    const rows = await this.db.asset.findMany({ where: { accountId, jobId: null, filePath: { in: names }, ...notExpired() }, select: { id: true, filePath: true }, orderBy: { createdAt: 'desc' } });
    for (const a of rows) if (!found.has(a.filePath)) found.set(a.filePath, a.id);
    return found;
  }

  private async outputAsset(accountId: string, jobId: string, name: string, type: string): Promise<string | null> {
    const row = await this.db.jobOutput.findFirst({
      where: { jobId, name, engineType: type, job: { accountId }, asset: notExpired() },
      select: { assetId: true },
      orderBy: { id: 'asc' },
    });
    return row?.assetId ?? null;
  }
}

function withChoices(entry: unknown[], names: string[]): unknown[] {
  const options = isObject(entry[1]) ? entry[1] : {};
  if (entry[0] === 'COMBO') return ['COMBO', { ...options, options: names }, ...entry.slice(2)];
  return [names, ...entry.slice(1)];
}

/**
 * The definitions with the account's model files of each model input's folder after the engines'
 * own choices (a name in both is listed once). Classes without such inputs are shared, not copied.
 */
function withModelChoices(defs: NodeDefinitions, modelInputs: ModelInputs, models: TenantModels): NodeDefinitions {
  if (models.empty) return defs;
  let out: NodeDefinitions | null = null;
  for (const m of modelInputs.list) {
    const names = models.names(m.folder);
    const def = (out ?? defs)[m.classType];
    const inputs = def?.input?.[m.section];
    const entry = inputs?.[m.input];
    if (names.length === 0 || !def || !Array.isArray(entry)) continue;
    const shared = (Array.isArray(entry[0]) ? entry[0] : isObject(entry[1]) && Array.isArray(entry[1].options) ? entry[1].options : []) as unknown[];
    const seen = new Set(shared);
    out ??= { ...defs };
    out[m.classType] = { ...def, input: { ...def.input, [m.section]: { ...inputs, [m.input]: withChoices(entry, [...shared, ...names.filter((n) => !seen.has(n))] as string[]) } } };
  }
  return out ?? defs;
}
