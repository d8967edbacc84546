import type { FastifyRequest } from 'fastify';
import { ApiError } from '#libs/contracts';
import type { StoredBlob } from '#libs/storage';

export interface ParsedUpload {
  stored: StoredBlob;
  fileName: string;
  mimeType: string;
  fields: Map<string, string[]>;
}

/**
 * Reads a multipart upload whose `file` part is streamed straight into storage. Text fields may
 * come before or after the file; they are collected as they arrive. Should the rest of the body
 * be refused once the file is stored, `discard` gets the stored bytes: nothing records them, so
 * nothing would ever delete them.
 */
export async function readMultipartUpload(
  request: FastifyRequest,
  fileField: string,
  store: (stream: NodeJS.ReadableStream & import('node:stream').Readable) => Promise<StoredBlob>,
  discard: (stored: StoredBlob) => Promise<void> = async () => undefined,
): Promise<ParsedUpload> {
  if (!request.isMultipart()) {
    throw new ApiError('unsupported_media_type', 'Send the upload as multipart/form-data.');
  }
  const fields = new Map<string, string[]>();
  let upload: Omit<ParsedUpload, 'fields'> | null = null;
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        if (part.fieldname !== fileField || upload) {
          part.file.resume(); // drain parts we do not use
          if (part.fieldname === fileField) throw ApiError.invalid(`Send exactly one "${fileField}" part.`);
          continue;
        }
        // At the limit busboy passes no more bytes on, but it would read the rest of the body, up
        // to the whole declared length, before the stream ends: refuse at once instead. (A limit
        // smaller than the stream's buffer may have been reached already.)
        const refuse = () => part.file.destroy(tooLarge());
        if (part.file.truncated) refuse();
        else part.file.once('limit', refuse);
        let stored: StoredBlob;
        try {
          stored = await store(part.file);
        } catch (err) {
          // The client's own stream broke (cut short, malformed): its problem, not ours. A verdict
          // already made (too large, the store refusing) stands, whatever the stream saw after it.
          const fromClient = err instanceof ApiError ? null : (part.file.errored ?? null);
          throw fromClient ? multipartError(fromClient) : err;
        }
        upload = { stored, fileName: part.filename, mimeType: part.mimetype };
        // The multipart limit ends the stream quietly: what was stored is only the file's beginning.
        if (part.file.truncated) throw new ApiError('payload_too_large', 'The file is larger than the upload limit.');
      } else {
        // A cut-off value would be silently wrong (a file_path, an original_ref): refuse it instead.
        if (part.valueTruncated || part.fieldnameTruncated) throw new ApiError('payload_too_large', `The multipart field "${part.fieldname.slice(0, 64)}" is too long.`);
        const list = fields.get(part.fieldname) ?? [];
        list.push(String(part.value));
        fields.set(part.fieldname, list);
      }
    }
  } catch (err) {
    if (upload) await discard(upload.stored).catch(() => undefined);
    throw multipartError(err);
  }
  if (!upload) throw ApiError.invalid(`The multipart body has no "${fileField}" file part.`);
  return { ...upload, fields };
}

/**
 * The answer to a file over the limit, sent while the client may still be sending: the connection
 * closes after it, so the rest of the body is never read.
 */
function tooLarge(): ApiError {
  return new ApiError('payload_too_large', 'The file is larger than the upload limit.', undefined, { connection: 'close' });
}

function multipartError(err: unknown): unknown {
  if (err instanceof ApiError) return err;
  const e = err as { code?: string; statusCode?: number; message?: string };
  switch (e.code) {
    case 'FST_REQ_FILE_TOO_LARGE':
      return new ApiError('payload_too_large', 'The file is larger than the upload limit.');
    case 'FST_PARTS_LIMIT':
    case 'FST_FILES_LIMIT':
    case 'FST_FIELDS_LIMIT':
      return new ApiError('payload_too_large', 'The multipart body has too many parts.');
    case 'FST_PROTO_VIOLATION':
    case 'FST_INVALID_MULTIPART_CONTENT_TYPE':
      return ApiError.invalid('The multipart body is malformed.');
  }
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) return err;
  if (/Unexpected end of (form|multipart)|Malformed|boundary|Part terminated early/i.test(e.message ?? '')) {
    return ApiError.invalid('The multipart body is malformed or ends early.');
  }
  return err;
}

/** The text fields as one object for the operation's schema: the last value of a repeated field. */
export function lastValues(fields: Map<string, string[]>): Record<string, string> {
  return Object.fromEntries([...fields].map(([name, values]) => [name, values[values.length - 1]!]));
}
