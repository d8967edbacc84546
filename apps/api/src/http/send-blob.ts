import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { ApiError, ByteRangeSchema } from '#libs/contracts';
import { contentDisposition, type BlobStore, type ByteRange } from '#libs/storage';
import { parseWith } from '../contract/index.js';

/** The bytes a Range (as ByteRangeSchema reads it) asks of content of `size` bytes. */
export function resolveRange(range: z.output<typeof ByteRangeSchema>, size: number): ByteRange | 'unsatisfiable' | null {
  if (!range) return null;
  let start: number;
  let end: number;
  if (range.first === null) {
    const suffix = range.last!;
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = range.first;
    end = range.last === null ? size - 1 : Math.min(range.last, size - 1);
  }
  if (start >= size || start > end) return 'unsatisfiable';
  return { start, end };
}

// A media type as a header may carry it: anything else stored with a blob is served as bytes.
const MEDIA_TYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(\s*;\s*[A-Za-z0-9_.-]+=("[\x20\x21\x23-\x7e]*"|[A-Za-z0-9_.+-]+))*$/;

/** Whether a header can carry this media type as it is; uploads are held to it too. */
export function isMediaType(value: string): boolean {
  return MEDIA_TYPE.test(value);
}

export function safeContentType(value: string): string {
  return isMediaType(value) ? value : 'application/octet-stream';
}

/**
 * Uploaded bytes are served from the API's own origin; whatever they are (an HTML page, an SVG
 * with script), a browser opening them directly must not run them there.
 */
export const BLOB_CSP = "default-src 'none'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'; sandbox";

/** Streams a blob to the client, honouring Range (206/416); never buffers it whole. */
export async function sendBlob(
  request: FastifyRequest,
  reply: FastifyReply,
  store: BlobStore,
  blob: { hash: string; fileName: string; contentType: string },
): Promise<FastifyReply> {
  const size = await store.size(blob.hash);
  if (size === null) throw new ApiError('not_found', 'The content is no longer available.');
  // ByteRangeSchema refuses nothing: a Range that is not one byte range is ignored.
  const range = resolveRange(parseWith(ByteRangeSchema, request.headers.range, (issues) => ApiError.invalid(issues[0]!.message)), size);
  reply.header('accept-ranges', 'bytes');
  reply.header('content-type', safeContentType(blob.contentType));
  reply.header('content-disposition', contentDisposition(blob.fileName));
  reply.header('etag', `"${blob.hash}"`);
  reply.header('x-content-type-options', 'nosniff');
  reply.header('content-security-policy', BLOB_CSP);
  if (range === 'unsatisfiable') {
    reply.header('content-range', `bytes */${size}`);
    throw new ApiError('range_not_satisfiable', `The range is outside the content of ${size} bytes.`);
  }
  if (range) {
    reply.status(206);
    reply.header('content-range', `bytes ${range.start}-${range.end}/${size}`);
    reply.header('content-length', String(range.end - range.start + 1));
    return reply.send(await store.read(blob.hash, range));
  }
  reply.header('content-length', String(size));
  if (size === 0) return reply.send('');
  return reply.send(await store.read(blob.hash));
}
