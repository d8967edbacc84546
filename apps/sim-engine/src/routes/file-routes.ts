/** GET /view (streamed) and POST /upload/image, /upload/mask (multipart, streamed to disk). */
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { copyFile, rename, unlink } from 'node:fs/promises';
import { once } from 'node:events';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { EngineState } from '../engine-state.js';
import { sendEmpty, sendJson } from '../http-util.js';
import { readImageFile } from '../nodes/image-nodes.js';
import { encodePng } from '../png.js';
import { isInside } from '../storage.js';

const CONTENT_TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.webp': 'image/webp',
  '.gif': 'image/gif',
  '.flac': 'audio/flac',
  '.wav': 'audio/x-wav',
  '.mp3': 'audio/mpeg',
  '.ogg': 'audio/ogg',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.json': 'application/json',
  '.txt': 'text/plain',
};

function contentTypeFor(name: string): string {
  return CONTENT_TYPES[path.extname(name).toLowerCase()] ?? 'application/octet-stream';
}

async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  await pipeline(createReadStream(file), h);
  return h.digest('hex');
}

async function moveFile(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    await copyFile(from, to);
    await unlink(from);
  }
}

interface ReceivedUpload {
  fields: Record<string, string>;
  file?: { filename: string; tmpPath: string; sha256: string; truncated: boolean };
}

/** Read every part; the `image` file goes to a temp file while hashing, never into memory. */
async function receiveMultipart(req: FastifyRequest, state: EngineState): Promise<ReceivedUpload> {
  const out: ReceivedUpload = { fields: {} };
  for await (const part of req.parts({ limits: { fileSize: state.config.maxUploadSize } })) {
    if (part.type === 'file') {
      if (part.fieldname !== 'image' || out.file) {
        part.file.resume();
        await once(part.file, 'end');
        continue;
      }
      const tmpPath = path.join(state.storage.inputDir, `.sim-upload-${randomUUID()}.part`);
      const hash = createHash('sha256');
      part.file.on('data', (c: Buffer) => hash.update(c));
      await pipeline(part.file, createWriteStream(tmpPath));
      out.file = { filename: part.filename, tmpPath, sha256: hash.digest('hex'), truncated: part.file.truncated };
    } else {
      out.fields[part.fieldname] = String(part.value);
    }
  }
  return out;
}

export function registerFileRoutes(app: FastifyInstance, state: EngineState): void {
  app.get<{ Querystring: Record<string, string | undefined> }>('/view', async (req, reply) => {
    const q = req.query;
    if (q.filename === undefined) return sendEmpty(reply, 404);
    const annotated = /^(.*) \[(input|output|temp)\]$/.exec(q.filename);
    let filename = annotated ? annotated[1]! : q.filename;
    if (!filename) return sendEmpty(reply, 400);
    // the engine's guard against arbitrary paths
    if (filename.startsWith('/') || filename.includes('..')) return sendEmpty(reply, 400);
    let dir = annotated ? state.storage.dirFor(annotated[2]) : state.storage.dirFor(q.type ?? 'output');
    if (!dir) return sendEmpty(reply, 400);
    if (q.subfolder !== undefined) {
      const full = path.resolve(dir, q.subfolder);
      if (!isInside(dir, full)) return sendEmpty(reply, 403);
      dir = full;
    }
    filename = path.basename(filename);
    const file = path.join(dir, filename);
    let size: number;
    try {
      const st = statSync(file);
      if (!st.isFile()) return sendEmpty(reply, 404);
      size = st.size;
    } catch {
      return sendEmpty(reply, 404);
    }
    return reply
      .code(200)
      .header('content-type', contentTypeFor(filename))
      .header('content-disposition', `filename="${filename}"`)
      .header('content-length', String(size))
      .send(createReadStream(file));
  });

  const upload = (isMask: boolean) => async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    if (!req.isMultipart()) return sendEmpty(reply, 400);
    let received: ReceivedUpload;
    try {
      received = await receiveMultipart(req, state);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'FST_REQ_FILE_TOO_LARGE') return sendEmpty(reply, 413);
      return sendEmpty(reply, 400);
    }
    const file = received.file;
    const cleanup = async (): Promise<void> => {
      if (file) await unlink(file.tmpPath).catch(() => undefined);
    };
    if (!file) return sendEmpty(reply, 400);
    if (file.truncated) {
      await cleanup();
      return sendEmpty(reply, 413);
    }
    if (!file.filename) {
      await cleanup();
      return sendEmpty(reply, 400);
    }
    const type = received.fields.type || 'input';
    const uploadDir = state.storage.dirFor(type);
    if (!uploadDir) {
      await cleanup();
      return sendEmpty(reply, 400);
    }
    const subfolder = received.fields.subfolder ?? '';
    const folder = path.resolve(uploadDir, path.normalize(subfolder || '.'));
    let filename = file.filename;
    let filepath = path.resolve(folder, filename);
    if (!isInside(uploadDir, filepath) || path.dirname(filepath) !== folder) {
      await cleanup();
      return sendEmpty(reply, 400);
    }
    mkdirSync(folder, { recursive: true });
    const overwrite = received.fields.overwrite;
    let duplicate = false;
    if (!(overwrite === 'true' || overwrite === '1')) {
      const ext = path.extname(filename);
      const stem = filename.slice(0, filename.length - ext.length);
      for (let i = 1; existsSync(filepath); i++) {
        if ((await sha256File(filepath)) === file.sha256) {
          duplicate = true; // same bytes under that name already: reuse it
          break;
        }
        filename = `${stem} (${i})${ext}`;
        filepath = path.join(folder, filename);
      }
    }
    if (duplicate) await cleanup();
    else if (isMask) {
      const status = applyMask(state, received.fields.original_ref, file.tmpPath, filepath);
      await cleanup();
      if (status !== 200) return sendEmpty(reply, status);
    } else await moveFile(file.tmpPath, filepath);
    return sendJson(reply, { name: filename, subfolder, type });
  };

  app.post('/upload/image', upload(false));
  app.post('/upload/mask', upload(true));
}

/** The mask's alpha channel replaces the original image's alpha; text chunks are kept. */
function applyMask(state: EngineState, originalRefText: string | undefined, maskPath: string, target: string): number {
  let ref: { filename?: unknown; subfolder?: unknown; type?: unknown };
  try {
    ref = JSON.parse(originalRefText ?? '') as typeof ref;
  } catch {
    return 400;
  }
  if (typeof ref.filename !== 'string' || !ref.filename) return 400;
  const annotated = /^(.*) \[(input|output|temp)\]$/.exec(ref.filename);
  const name = annotated ? annotated[1]! : ref.filename;
  if (name.startsWith('/') || name.includes('..')) return 400;
  let dir = annotated ? state.storage.dirFor(annotated[2]) : state.storage.dirFor(typeof ref.type === 'string' ? ref.type : 'output');
  if (!dir) return 400;
  if (typeof ref.subfolder === 'string' && ref.subfolder !== '') {
    const full = path.resolve(dir, ref.subfolder);
    if (!isInside(dir, full)) return 403;
    dir = full;
  }
  const original = path.join(dir, name);
  // like the engine: a missing original writes nothing but still answers 200
  if (!existsSync(original)) return 200;
  let base;
  let mask;
  try {
    base = readImageFile(original);
    mask = readImageFile(maskPath);
  } catch {
    return 400;
  }
  const n = base.width * base.height;
  const data = new Uint8Array(n * 4);
  for (let p = 0; p < n; p++) {
    for (let c = 0; c < 3; c++) data[p * 4 + c] = base.data[p * base.channels + c]!;
    const x = p % base.width;
    const y = Math.floor(p / base.width);
    const inMask = x < mask.width && y < mask.height;
    data[p * 4 + 3] = inMask && mask.channels === 4 ? mask.data[(y * mask.width + x) * 4 + 3]! : 255;
  }
  const text = 'text' in base ? (base as { text: Array<[string, string]> }).text : [];
  writeFileSync(target, encodePng({ width: base.width, height: base.height, channels: 4, data }, { compressLevel: 4, text }));
  return 200;
}
