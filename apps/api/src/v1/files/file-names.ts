import { isUuid } from '#libs/contracts';
// v1 file names. Uploads live in the flat content-addressed store, so their engine-style name is
// the blake3 hash of the bytes plus an extension: the same bytes always get the same name, and
// a name says nothing about who uploaded it. Outputs keep the engine's file name with the job id
// as their subfolder, which is how `/api/view` and later prompts find them.

const UPLOAD_NAME = /^([0-9a-f]{64})(\.[a-z0-9]{1,10})?$/;
const ANNOTATION = /^(.*) \[(input|output|temp)\]$/;

const EXT_BY_TYPE: Record<string, string> = {
  'image/png': '.png',
  'image/jpeg': '.jpg',
  'image/webp': '.webp',
  'image/gif': '.gif',
  'image/bmp': '.bmp',
  'image/tiff': '.tiff',
  'video/mp4': '.mp4',
  'video/webm': '.webm',
  'audio/wav': '.wav',
  'audio/x-wav': '.wav',
  'audio/mpeg': '.mp3',
  'audio/flac': '.flac',
  'audio/ogg': '.ogg',
};

export type FileRef =
  | { kind: 'upload'; hash: string }
  | { kind: 'output'; jobId: string; name: string; type: 'output' | 'temp' };


/** The extension an upload keeps: the client's own when it is plain, else one for its media type. */
export function uploadExtension(fileName: string | undefined, mimeType: string | undefined): string {
  const m = /\.([A-Za-z0-9]{1,10})$/.exec(fileName ?? '');
  if (m) return `.${m[1]!.toLowerCase()}`;
  return EXT_BY_TYPE[(mimeType ?? '').split(';')[0]!.trim().toLowerCase()] ?? '';
}

export function uploadName(hash: string, extension: string): string {
  return `${hash}${extension}`;
}

export function hashOfUploadName(name: string): string | null {
  return UPLOAD_NAME.exec(name)?.[1] ?? null;
}

/**
 * A name or folder that reaches outside where it is looked up: a `..` segment, an absolute or
 * Windows path, or control characters. Names here never touch a disk, but the engine refuses
 * such names on `/view` and so do we, rather than quietly resolving them to something else.
 */
export function escapesFolder(value: string): boolean {
  // eslint-disable-next-line no-control-regex
  return value.startsWith('/') || /[\\\u0000-\u001f\u007f]/.test(value) || value.split('/').includes('..');
}

/**
 * What a file value in a prompt (or a `{filename, subfolder, type}` reference) points at:
 * `<hash>.png`, `sub/<hash>.png [input]`, or `<job id>/<name> [output]`; null for anything else.
 */
export function parseFileValue(value: string, type?: string, subfolder?: string): FileRef | null {
  if (escapesFolder(value) || (subfolder !== undefined && escapesFolder(subfolder))) return null;
  let folderType = type ?? 'input';
  let path = value;
  const annotated = ANNOTATION.exec(value);
  if (annotated) {
    path = annotated[1]!;
    folderType = annotated[2]!;
  }
  const slash = path.lastIndexOf('/');
  const base = slash >= 0 ? path.slice(slash + 1) : path;
  const folder = subfolder ?? (slash >= 0 ? path.slice(0, slash) : '');
  if ((folderType === 'output' || folderType === 'temp') && isUuid(folder) && base.length > 0) {
    return { kind: 'output', jobId: folder.toLowerCase(), name: base, type: folderType };
  }
  const hash = hashOfUploadName(base);
  return hash ? { kind: 'upload', hash } : null;
}
