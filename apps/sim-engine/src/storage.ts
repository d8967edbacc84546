/** The engine's input/output/temp folders and its file-naming rules. */
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { ModelFolders } from './models.js';

export type FolderType = 'input' | 'output' | 'temp';

export class SaveOutsideOutputError extends Error {
  override name = 'Exception';
}

export class Storage {
  constructor(
    readonly inputDir: string,
    readonly outputDir: string,
    readonly tempDir: string,
    /** The model folders the loaders read. */
    readonly models: ModelFolders = new ModelFolders(undefined),
  ) {
    for (const d of [inputDir, outputDir, tempDir]) mkdirSync(d, { recursive: true });
  }

  dirFor(type: string | undefined): string | undefined {
    if (type === 'input') return this.inputDir;
    if (type === 'output') return this.outputDir;
    if (type === 'temp') return this.tempDir;
    return undefined;
  }

  /** `name [output]` style annotations select a folder, as the engine allows. */
  annotated(name: string, defaultType: FolderType): { name: string; dir: string } {
    const m = /^(.*) \[(input|output|temp)\]$/.exec(name);
    if (m) return { name: m[1]!, dir: this.dirFor(m[2])! };
    return { name, dir: this.dirFor(defaultType)! };
  }

  /** Files directly in the input folder that look like images, sorted (LoadImage's list). */
  listInputImages(): string[] {
    return this.listInputFiles().filter((f) => /\.(png|jpe?g|webp|gif|bmp|tiff?)$/i.test(f));
  }

  /** Files directly in the input folder that hold sound (audio or video), sorted (LoadAudio's list). */
  listInputAudio(): string[] {
    return this.listInputFiles().filter((f) => /\.(wav|flac|mp3|ogg|opus|m4a|aac|mp4|webm|mov|mkv)$/i.test(f));
  }

  /** Files directly in the input folder, sorted: the engine lists no subfolder. */
  private listInputFiles(): string[] {
    let entries: string[] = [];
    try {
      entries = readdirSync(this.inputDir).filter((f) => {
        try {
          return statSync(path.join(this.inputDir, f)).isFile();
        } catch {
          return false;
        }
      });
    } catch {
      return [];
    }
    return entries.sort();
  }

  inputExists(name: string): boolean {
    const a = this.annotated(name, 'input');
    return isInside(a.dir, path.join(a.dir, a.name)) && existsSync(path.join(a.dir, a.name));
  }

  inputPath(name: string): string {
    const a = this.annotated(name, 'input');
    return path.join(a.dir, a.name);
  }

  /**
   * The engine's get_save_image_path: the prefix may hold a subfolder; the counter is one more
   * than the highest `<name>_NNNNN_` already there.
   */
  savePath(filenamePrefix: string, baseDir: string, width = 0, height = 0): { folder: string; filename: string; counter: number; subfolder: string } {
    let prefix = filenamePrefix;
    if (prefix.includes('%')) {
      const now = new Date();
      const z = (n: number): string => String(n).padStart(2, '0');
      prefix = prefix
        .replaceAll('%width%', String(width))
        .replaceAll('%height%', String(height))
        .replaceAll('%year%', String(now.getFullYear()))
        .replaceAll('%month%', z(now.getMonth() + 1))
        .replaceAll('%day%', z(now.getDate()))
        .replaceAll('%hour%', z(now.getHours()))
        .replaceAll('%minute%', z(now.getMinutes()))
        .replaceAll('%second%', z(now.getSeconds()));
    }
    const normalized = path.normalize(prefix);
    const subfolder = path.dirname(normalized) === '.' ? '' : path.dirname(normalized);
    const filename = path.basename(normalized);
    const folder = path.resolve(baseDir, subfolder);
    if (!isInside(baseDir, folder)) {
      throw new SaveOutsideOutputError(
        `**** ERROR: Saving image outside the output folder is not allowed.\n full_output_folder: ${folder}\n         output_dir: ${baseDir}`,
      );
    }
    mkdirSync(folder, { recursive: true });
    let counter = 1;
    for (const f of readdirSync(folder)) {
      if (f.slice(0, filename.length) !== filename || f[filename.length] !== '_') continue;
      const digits = parseInt(f.slice(filename.length + 1).split('_')[0] ?? '', 10);
      if (Number.isFinite(digits) && digits + 1 > counter) counter = digits + 1;
    }
    return { folder, filename, counter, subfolder };
  }
}

export function isInside(base: string, target: string): boolean {
  const rel = path.relative(path.resolve(base), path.resolve(target));
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

export function counterName(filename: string, counter: number, ext: string): string {
  return `${filename}_${String(counter).padStart(5, '0')}_.${ext}`;
}
