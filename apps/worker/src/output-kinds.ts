import { guessContentType } from '#libs/assets';

export type OutputType = 'image' | 'video' | 'audio' | 'text' | 'file' | 'latent';

export interface EngineFileRef {
  filename: string;
  subfolder: string;
  type: string;
}

/**
 * One thing a node produced: a file on the engine or inline text (from its UI output), or an
 * image it sent only over the socket (SaveImageWebsocket), as the bytes it sent.
 */
export type ReportedOutput =
  | { kind: 'file'; key: string; ref: EngineFileRef; index: number }
  | { kind: 'text'; key: string; text: string; index: number }
  | { kind: 'bytes'; key: string; data: Buffer; contentType: string; index: number };

const IMAGE_EXTENSIONS: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp' };

/**
 * The name an output is stored under. Text and socket images have no file on the engine: they are
 * named after their node, key and place, so a job run again finds what its earlier attempt stored.
 */
export function outputName(nodeId: string, output: ReportedOutput): string {
  if (output.kind === 'file') return output.ref.filename;
  if (output.kind === 'text') return `${nodeId}_${output.key}_${output.index}.txt`;
  return `${nodeId}_${output.key}_${output.index}.${IMAGE_EXTENSIONS[output.contentType] ?? 'bin'}`;
}

function isFileRef(v: unknown): v is EngineFileRef {
  const r = v as Partial<EngineFileRef> | null;
  return typeof r === 'object' && r !== null && typeof r.filename === 'string' && r.filename.length > 0;
}

/**
 * Everything an `executed` message reports. Files under any key are outputs (unknown keys
 * included); strings are text outputs; flags such as `animated: [true]` describe, not produce.
 */
export function reportedOutputs(output: Record<string, unknown> | null | undefined): ReportedOutput[] {
  const found: ReportedOutput[] = [];
  for (const [key, value] of Object.entries(output ?? {})) {
    if (!Array.isArray(value)) continue;
    value.forEach((item, index) => {
      if (isFileRef(item)) found.push({ kind: 'file', key, ref: { filename: item.filename, subfolder: item.subfolder ?? '', type: item.type ?? 'output' }, index });
      else if (typeof item === 'string' && (key === 'text' || key === 'string' || key === 'texts')) found.push({ kind: 'text', key, text: item, index });
    });
  }
  return found;
}

export function outputType(key: string, fileName: string, contentType: string): OutputType {
  if (key === 'latents' || fileName.endsWith('.latent')) return 'latent';
  if (key === 'audio') return 'audio';
  if (key === 'video' || key === 'videos' || key === 'gifs') return 'video';
  if (key === 'text') return 'text';
  const major = contentType.split('/')[0];
  if (major === 'image' || major === 'video' || major === 'audio' || major === 'text') return major;
  return 'file';
}

export function contentTypeFor(fileName: string, engineType: string | null): string {
  const guessed = guessContentType(fileName);
  if (guessed !== 'application/octet-stream') return guessed;
  return engineType && /^[\w.+-]+\/[\w.+-]+/.test(engineType) ? engineType : guessed;
}
