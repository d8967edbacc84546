import { randomUUID } from 'node:crypto';
import { Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isRouterPath } from '../http/error-body.js';
import { isJsonContentType } from '../http/json-body.js';

// Per-request facts the router needs before Nest sees the request: its own server-generated id
// (set as a header at once, so even errors raised by Fastify carry it) and the body's exact bytes
// (the partner receives the caller's JSON unchanged, not a re-serialization of it). A call's body of
// a type no parser takes (XML, a form, a body with no type) is read as text: Fastify would refuse
// it (415) before the guard runs, and it must be refused after authentication, as a recorded call.

const SERVICE_ID = Symbol('serviceRequestId');
const RAW_BODY = Symbol('routerRawBody');

type RouterRequest = FastifyRequest & { [SERVICE_ID]?: string; [RAW_BODY]?: Buffer };

export function serviceRequestId(request: FastifyRequest): string {
  const req = request as RouterRequest;
  return (req[SERVICE_ID] ??= randomUUID());
}

/** Puts the router's id on a response to a router path; other responses are left alone. */
export function setServiceRequestId(request: FastifyRequest, reply: FastifyReply, basePath: string): void {
  if (isRouterPath(request.url, basePath)) reply.header('x-service-request-id', serviceRequestId(request));
}

export function rawBody(request: FastifyRequest): Buffer | undefined {
  return (request as RouterRequest)[RAW_BODY];
}

/** The call then reaches the route, which takes only JSON and says so as `invalid_input`. */
function readAsTextUnlessJson(request: FastifyRequest): void {
  const headers = request.raw.headers;
  const hasBody = headers['transfer-encoding'] !== undefined || (headers['content-length'] ?? '0') !== '0';
  if (!isJsonContentType(headers['content-type']) && (headers['content-type'] !== undefined || hasBody)) {
    headers['content-type'] = 'text/plain; charset=utf-8';
  }
}

export function installRouterHooks(fastify: FastifyInstance, basePath: string): void {
  // Callbacks, not async hooks: they run on every request (see installHttpHooks).
  fastify.addHook('onRequest', (request, reply, done) => {
    setServiceRequestId(request, reply, basePath);
    if (request.method === 'POST' && isRouterPath(request.url, basePath)) readAsTextUnlessJson(request);
    done();
  });
  fastify.addHook('preParsing', (request, _reply, payload, done) => {
    if (request.method !== 'POST' || !isRouterPath(request.url, basePath)) return done(null, payload);
    const chunks: Buffer[] = [];
    const tee = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk);
        // Fastify's parser enforces its body limit on this count.
        tee.receivedEncodedLength += chunk.length;
        callback(null, chunk);
      },
      flush(callback) {
        (request as RouterRequest)[RAW_BODY] = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        callback();
      },
    }) as Transform & { receivedEncodedLength: number };
    tee.receivedEncodedLength = 0;
    payload.on('error', (err) => tee.destroy(err));
    done(null, payload.pipe(tee));
  });
}
