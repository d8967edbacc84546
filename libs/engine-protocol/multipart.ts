/** multipart/form-data bodies, written by the `form-data` package as a stream: file bytes are never buffered whole. */
import FormData from 'form-data';
import { Readable } from 'node:stream';

export interface MultipartField {
  name: string;
  value: string;
}

export interface MultipartFile {
  name: string;
  filename: string;
  contentType: string;
  data: Readable | Buffer | Uint8Array | AsyncIterable<Uint8Array>;
}

export interface MultipartBody {
  boundary: string;
  contentType: string;
  /** The body as it is read; destroying it (a server that answered early) releases the files' sources too. */
  stream: Readable;
}

function asStreamable(data: MultipartFile['data']): Buffer | Readable {
  if (Buffer.isBuffer(data)) return data;
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return data instanceof Readable ? data : Readable.from(data);
}

export function buildMultipartBody(fields: MultipartField[], files: MultipartFile[]): MultipartBody {
  const form = new FormData();
  // The engine reads fields with aiohttp's request.post(): order does not matter,
  // but fields first lets a streaming server know `type`/`subfolder` before the file.
  for (const f of fields) form.append(f.name, f.value);
  const sources: Readable[] = [];
  for (const file of files) {
    const data = asStreamable(file.data);
    if (data instanceof Readable) sources.push(data);
    form.append(file.name, data, { filename: file.filename, contentType: file.contentType });
  }
  // form-data is a classic (pre-streams2) stream: wrapped, it is a Readable with back-pressure.
  // It leaves a source open when it is torn down early, so the wrapper's end closes them.
  const stream = new Readable().wrap(form);
  stream.once('close', () => {
    for (const source of sources) if (!source.readableEnded) source.destroy();
  });
  form.resume();
  return { boundary: form.getBoundary(), contentType: form.getHeaders()['content-type'] as string, stream };
}
