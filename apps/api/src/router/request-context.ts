import { randomUUID } from 'node:crypto';
import { Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isRouterPath } from '../http/error-body.js';

// Per-request facts the router needs before Nest sees the request: its own server-generated id
// (set as a header at once, so even errors raised by Fastify carry it) and the body's exact bytes
// (the partner receives the caller's JSON unchanged, not a re-serialization of it).

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

export function installRouterHooks(fastify: FastifyInstance, basePath: string): void {
  // Callbacks, not async hooks: they run on every request (see installHttpHooks).
  fastify.addHook('onRequest', (request, reply, done) => {
    setServiceRequestId(request, reply, basePath);
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
