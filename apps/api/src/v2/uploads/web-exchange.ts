import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorEnvelope, type ErrorCode } from '#libs/contracts';

/** The content type an upload body travels under inside the API, so that no parser reads it. */
const PASS_THROUGH = 'application/x-comfy-upload-stream';
const SENT_TYPE = Symbol('uploadContentType');

type RawWithType = IncomingMessage & { [SENT_TYPE]?: string | undefined };

/**
 * Upload bodies stay unread until the tus server streams them into its store: before routing,
 * a request under `prefix` is marked with a content type whose parser reads nothing, and the type
 * the client sent is kept for the tus server, which checks it.
 */
export function passUploadBodiesThrough(fastify: FastifyInstance, prefix: string): void {
  fastify.addHook('onRequest', (request, _reply, done) => {
    if ((request.method === 'POST' || request.method === 'PATCH') && request.url.startsWith(prefix)) {
      const raw = request.raw as RawWithType;
      raw[SENT_TYPE] = raw.headers['content-type'];
      raw.headers['content-type'] = PASS_THROUGH;
    }
    done();
  });
  fastify.addContentTypeParser(PASS_THROUGH, (_request, _payload, done) => done(null));
}

/**
 * The client's bytes as a web stream that ends, rather than fails, when the client hangs up: what
 * arrived before is a sound beginning of the file, which the tus server keeps so that the upload
 * resumes from there (its file store writes as bytes come; its S3 store keeps the last short part).
 * Read at the pace it is consumed.
 */
function bodyOf(raw: IncomingMessage): ReadableStream<Uint8Array> {
  let done = false;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const finish = () => {
        if (done) return;
        done = true;
        controller.close();
      };
      raw.on('data', (chunk: Buffer) => {
        if (done) return;
        controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        if ((controller.desiredSize ?? 0) <= 0) raw.pause();
      });
      raw.on('end', finish);
      raw.on('close', finish);
      raw.on('error', finish);
      raw.pause();
    },
    pull() {
      raw.resume();
    },
    cancel() {
      done = true;
      raw.destroy();
    },
  });
}

/** The request as a fetch Request, its body the client's stream (read once, by whoever handles it). */
export function toWebRequest(request: FastifyRequest, origin: string): Request {
  const raw = request.raw as RawWithType;
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw.headers)) {
    if (value === undefined) continue;
    if (name === 'content-type') {
      if (raw[SENT_TYPE] !== undefined) headers.set(name, raw[SENT_TYPE]);
      continue;
    }
    for (const v of [value].flat()) headers.append(name, v);
  }
  const hasBody = (request.method === 'POST' || request.method === 'PATCH') && (raw.headers['transfer-encoding'] !== undefined || Number(raw.headers['content-length'] ?? 0) > 0);
  return new Request(`${origin}${request.url}`, {
    method: request.method,
    headers,
    body: hasBody ? bodyOf(raw) : null,
    duplex: 'half',
  } as RequestInit);
}

const CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: 'invalid_request',
  403: 'forbidden',
  404: 'not_found',
  409: 'upload_conflict',
  410: 'not_found',
  412: 'invalid_request',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
};

/**
 * Sends what the tus server answered through Fastify (so CORS, compression and the request id
 * apply). Its refusals, plain text, leave in the v2 envelope with their status; a lock the
 * server could not take is a conflict to retry, not a fault.
 */
export async function sendWebResponse(reply: FastifyReply, response: Response): Promise<FastifyReply> {
  let status = response.status;
  // Length and type follow the body sent here; CORS headers are the API's own, never the tus server's.
  for (const [name, value] of response.headers) if (!/^(content-length|content-type|access-control-)/.test(name)) reply.header(name, value);
  if (status < 400) {
    const body = response.body ? Buffer.from(await response.arrayBuffer()) : null;
    if (!body || body.length === 0) return reply.status(status).send();
    return reply.status(status).header('content-type', response.headers.get('content-type') ?? 'application/octet-stream').send(body);
  }
  const text = (await response.text()).trim();
  if (text.startsWith('{"error"')) return reply.status(status).header('content-type', 'application/json; charset=utf-8').send(text);
  let code: string = CODE_BY_STATUS[status] ?? 'upstream_error';
  let message = text || 'The upload request failed.';
  if (status === 500 && /lock/i.test(text)) {
    status = 409;
    code = 'upload_conflict';
    message = 'Another request is writing this upload; retry once it has ended.';
  } else if (status >= 500) {
    message = 'Something went wrong on our side. Retry later.';
  }
  return reply.status(status).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(errorEnvelope(code, message)));
}
