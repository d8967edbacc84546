/**
 * The engine's model folders (folder_paths.py): each folder name maps to directories under the
 * models directory (`text_encoders` also reads `clip/`, `diffusion_models` also `unet/`), a
 * folder's list is every file below its directories with one of its extensions, subfolders kept
 * (`styles/ink.safetensors`), sorted; a name resolves to a file only inside its folder.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { isInside } from './storage.js';

const WEIGHTS = ['.ckpt', '.pt', '.pt2', '.bin', '.pth', '.safetensors', '.pkl', '.sft'];

/** The engine's folders, in its order, with the directories (under the models dir) and extensions of each. */
const FOLDERS: Array<[name: string, dirs: string[], extensions: string[] | null]> = [
  ['checkpoints', ['checkpoints'], WEIGHTS],
  ['configs', ['configs'], ['.yaml']],
  ['loras', ['loras'], WEIGHTS],
  ['vae', ['vae'], WEIGHTS],
  ['text_encoders', ['text_encoders', 'clip'], WEIGHTS],
  ['diffusion_models', ['unet', 'diffusion_models'], WEIGHTS],
  ['clip_vision', ['clip_vision'], WEIGHTS],
  ['style_models', ['style_models'], WEIGHTS],
  ['embeddings', ['embeddings'], WEIGHTS],
  ['diffusers', ['diffusers'], ['folder']],
  ['vae_approx', ['vae_approx'], WEIGHTS],
  ['controlnet', ['controlnet', 't2i_adapter'], WEIGHTS],
  ['gligen', ['gligen'], WEIGHTS],
  ['upscale_models', ['upscale_models'], WEIGHTS],
  // Not under the models dir on the engine; here they hold nothing.
  ['custom_nodes', [], null],
  ['hypernetworks', ['hypernetworks'], WEIGHTS],
  ['photomaker', ['photomaker'], WEIGHTS],
  ['classifiers', ['classifiers'], null],
  ['model_patches', ['model_patches'], WEIGHTS],
  ['audio_encoders', ['audio_encoders'], WEIGHTS],
];

export const MODEL_FOLDERS = FOLDERS.map(([name]) => name);

/**
 * What lies below `dir`, as paths relative to it with `/`, sorted, following links as the engine's
 * os.walk does (a link that leads nowhere is skipped): its files, or its directories.
 */
function below(dir: string, kind: 'files' | 'dirs'): string[] {
  const out: string[] = [];
  const walk = (sub: string): void => {
    let entries: string[];
    try {
      entries = readdirSync(path.join(dir, sub)).sort();
    } catch {
      return;
    }
    for (const entry of entries) {
      if (entry === '.git') continue;
      const rel = sub ? `${sub}/${entry}` : entry;
      let stats;
      try {
        stats = statSync(path.join(dir, rel));
      } catch {
        continue;
      }
      if (stats.isDirectory()) {
        if (kind === 'dirs') out.push(rel);
        walk(rel);
      } else if (stats.isFile() && kind === 'files') out.push(rel);
    }
  };
  walk('');
  return out;
}

export class ModelFolders {
  constructor(
    /** The engine's `models` directory; undefined: every folder is empty. */
    readonly root: string | undefined,
    /** Checkpoint names listed without a file behind them (the sim's stand-ins; SIM_CHECKPOINTS). */
    private readonly virtualCheckpoints: readonly string[] = [],
  ) {}

  has(folder: string): boolean {
    return MODEL_FOLDERS.includes(folder);
  }

  private dirsOf(folder: string): string[] {
    const entry = FOLDERS.find(([name]) => name === folder);
    if (!entry || !this.root) return [];
    return entry[1].map((d) => path.join(this.root!, d));
  }

  /** The folder's file names, sorted, as `/models/{folder}` and the loaders' lists show them. */
  list(folder: string): string[] {
    const entry = FOLDERS.find(([name]) => name === folder);
    if (!entry) return [];
    const extensions = entry[2];
    const names = new Set<string>(folder === 'checkpoints' ? this.virtualCheckpoints : []);
    for (const dir of this.dirsOf(folder)) {
      for (const f of below(dir, 'files')) if (extensions === null || extensions.includes(path.extname(f).toLowerCase())) names.add(f);
    }
    return [...names].sort();
  }

  /** A name listed with no file behind it: loaders take it without reading anything. */
  isVirtual(folder: string, name: string): boolean {
    return folder === 'checkpoints' && this.virtualCheckpoints.includes(name) && this.fullPath(folder, name) === null;
  }

  /** The engine's get_full_path: the first directory of the folder holding the name as a file. */
  fullPath(folder: string, name: string): string | null {
    const normalized = path.posix.normalize(`/${name}`).slice(1);
    for (const dir of this.dirsOf(folder)) {
      const full = path.join(dir, normalized);
      if (!isInside(dir, full)) continue;
      try {
        if (statSync(full).isFile()) return full;
      } catch {
        // not in this directory
      }
    }
    return null;
  }

  /**
   * The file an `embedding:<name>` loads (load_embed in comfy/sd1_clip.py): the name or the name
   * plus `.safetensors`, `.pt` or `.bin`, in the embeddings directory or any directory below it.
   * The engine tries those directories in no fixed order; here the top one comes first.
   */
  embeddingPath(name: string): string | null {
    const tops = this.dirsOf('embeddings').filter((d) => existsSync(d));
    const dirs = tops.flatMap((top) => [top, ...below(top, 'dirs').map((d) => path.join(top, d))]);
    for (const dir of dirs) {
      const base = path.resolve(dir, name);
      if (!isInside(dir, base)) continue;
      for (const candidate of [base, `${base}.safetensors`, `${base}.pt`, `${base}.bin`]) {
        try {
          if (statSync(candidate).isFile()) return candidate;
        } catch {
          // try the next form
        }
      }
    }
    return null;
  }
}
