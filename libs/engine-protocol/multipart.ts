/** A streaming multipart/form-data body writer: file bytes are never buffered whole. */
import { randomBytes } from 'node:crypto';
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
  stream: AsyncGenerator<Uint8Array>;
}

function escapeQuoted(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\r|\n/g, ' ');
}

export function buildMultipartBody(fields: MultipartField[], files: MultipartFile[]): MultipartBody {
  const boundary = '----engine-protocol-' + randomBytes(12).toString('hex');
  async function* generate(): AsyncGenerator<Uint8Array> {
    // The engine reads fields with aiohttp's request.post(): order does not matter,
    // but fields first lets a streaming server know `type`/`subfolder` before the file.
    for (const f of fields) {
      yield Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="${escapeQuoted(f.name)}"\r\n\r\n${f.value}\r\n`,
      );
    }
    for (const file of files) {
      yield Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="${escapeQuoted(file.name)}"; filename="${escapeQuoted(file.filename)}"\r\nContent-Type: ${file.contentType}\r\n\r\n`,
      );
      if (Buffer.isBuffer(file.data) || file.data instanceof Uint8Array) {
        yield file.data;
      } else {
        for await (const chunk of file.data as AsyncIterable<Uint8Array | string>) {
          yield typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        }
      }
      yield Buffer.from('\r\n');
    }
    yield Buffer.from(`--${boundary}--\r\n`);
  }
  return { boundary, contentType: `multipart/form-data; boundary=${boundary}`, stream: generate() };
}
