import { Inject, Injectable } from '@nestjs/common';
import { notExpired } from '#libs/assets';
import { isStorableText } from '#libs/contracts';
import type { Db } from '#libs/db';
import type { ApiWorkflow, NodeDefinitions } from '#libs/workflow';
import { DB } from '../core/tokens.js';
import { parseFileValue } from '../v1/files/file-names.js';
import { fileValues, withFileChoices, type FileKind } from './file-inputs.js';

const MAX_LISTED = 1000;

/** Where model files of an account will live; they are no input files. */
const MODELS_PREFIX = 'models/';

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
 */
@Injectable()
export class InputFiles {
  constructor(@Inject(DB) private readonly db: Db) {}

  /** The node definitions as this account sees them: its own files in every file input. */
  async definitionsFor(accountId: string, defs: NodeDefinitions): Promise<NodeDefinitions> {
    const [uploads, outputs] = await Promise.all([this.uploads(accountId), this.outputNames(accountId)]);
    const byKind = new Map<FileKind, string[]>();
    const choices = (kind: FileKind): string[] => {
      let names = byKind.get(kind);
      if (!names) {
        names = kind === 'output-image' ? outputs : [...new Set(uploads.filter((u) => fitsKind(u.contentType, kind)).map((u) => u.filePath))];
        byKind.set(kind, names);
      }
      return names;
    };
    return withFileChoices(defs, choices);
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
   */
  async resolve(accountId: string, workflow: unknown, defs: NodeDefinitions): Promise<unknown> {
    // A name PostgreSQL cannot hold (a NUL) is no file of anyone's: validation refuses it.
    const wanted = fileValues(workflow, defs).filter((w) => isStorableText(w.value));
    if (wanted.length === 0) return workflow;
    const refs = wanted.map((w) => {
      const ref = parseFileValue(w.value);
      // A plain name stands only in a file input; list inputs of the engine's own files (models)
      // keep their names.
      const plain = !ref && w.kind !== null ? w.value.replace(INPUT_ANNOTATION, '') : null;
      return { ...w, ref, plain };
    });
    const hashes = [...new Set(refs.flatMap((r) => (r.ref?.kind === 'upload' ? [r.ref.hash] : [])))];
    const names = [...new Set(refs.flatMap((r) => (r.plain !== null ? [r.plain] : [])))];
    const [byHash, byName] = await Promise.all([this.assetsByHash(accountId, hashes), this.assetsByName(accountId, names)]);
    let resolved: ApiWorkflow | null = null;
    for (const r of refs) {
      let assetId: string | undefined;
      if (r.ref?.kind === 'upload') assetId = byHash.get(r.ref.hash);
      else if (r.ref?.kind === 'output') assetId = (await this.outputAsset(accountId, r.ref.jobId, r.ref.name, r.ref.type)) ?? undefined;
      else if (r.plain !== null) assetId = byName.get(r.plain);
      if (!assetId) continue;
      resolved ??= { ...(workflow as ApiWorkflow) };
      const node = resolved[r.nodeId]!;
      resolved[r.nodeId] = { ...node, inputs: { ...node.inputs, [r.input]: { __type: 'core/ASSET', info: { id: assetId } } } };
    }
    return resolved ?? workflow;
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
