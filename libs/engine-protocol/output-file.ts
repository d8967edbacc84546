import { open } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';

// Reads of a local output go in 1 MiB pieces: a 200 MB video is then 200 hashes and writes, not
// 3,200, and the copy runs at the disk's pace rather than the event loop's.
const READ_CHUNK = 1024 * 1024;

/**
 * The engine's output file `name` in `subfolder`, read straight from its output folder when the
 * worker sees that folder (a shared volume, ENGINE_OUTPUT_DIR): no HTTP hop, no socket copy, no
 * parse of a response. Null when it cannot be read there (another type than `output`, an
 * annotated name, a path outside the folder, no such file): the caller asks the engine's /view,
 * which applies its own rules. The file is opened before this returns, so a later rename or
 * removal of the name cannot change what is read.
 */
export async function openOutputFile(outputDir: string, req: { filename: string; subfolder?: string; type?: string }): Promise<{ stream: Readable; size: number; file: string } | null> {
  if ((req.type ?? 'output') !== 'output') return null;
  // `name [output]` and friends name a folder by suffix: left to the engine, which knows them.
  if (/ \[(input|output|temp)\]$/.test(req.filename)) return null;
  const root = path.resolve(outputDir);
  const file = path.resolve(root, req.subfolder ?? '', path.basename(req.filename));
  const rel = path.relative(root, file);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) return null;
  let handle;
  try {
    handle = await open(file, 'r');
  } catch {
    return null;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) {
      await handle.close();
      return null;
    }
    return { stream: handle.createReadStream({ highWaterMark: READ_CHUNK }), size: info.size, file };
  } catch {
    await handle.close().catch(() => undefined);
    return null;
  }
}
