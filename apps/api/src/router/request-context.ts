import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { mountErrorRenderer, type ErrorRenderer } from '../http/error-renderer.js';
import { isJsonContentType } from '../http/json-body.js';

// Per-request facts the router needs before Nest sees the request: its own server-generated id
// (set as a header at once, so even errors raised by Fastify carry it). A call's body of
// a type no parser takes (XML, a form, a body with no type) is read as text: Fastify would refuse
// it (415) before the guard runs, and it must be refused after authentication, as a recorded call.

const SERVICE_ID = Symbol('serviceRequestId');

type RouterRequest = FastifyRequest & { [SERVICE_ID]?: string };

export function serviceRequestId(request: FastifyRequest): string {
  const req = request as RouterRequest;
  return (req[SERVICE_ID] ??= randomUUID());
}

function isRouterPath(url: string, basePath: string): boolean {
  return url.startsWith(`${basePath}/v1/models`);
}

/** The decoded path segments after `/v1/models/` (provider, model, and any more the caller sent). */
export function modelPathSegments(request: FastifyRequest): string[] {
  const path = request.url.split('?')[0]!;
  const rest = path.slice(path.indexOf('/v1/models/') + '/v1/models/'.length);
  return rest.split('/').map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
}

/** The call then reaches the route, which takes only JSON and says so as `invalid_input`. */
function readAsTextUnlessJson(request: FastifyRequest): void {
  const headers = request.raw.headers;
  const hasBody = headers['transfer-encoding'] !== undefined || (headers['content-length'] ?? '0') !== '0';
  if (!isJsonContentType(headers['content-type']) && (headers['content-type'] !== undefined || hasBody)) {
    headers['content-type'] = 'text/plain; charset=utf-8';
  }
}

/**
 * `onCut` hears of a call whose caller left while still sending its body: no guard or handler ever
 * runs for it, yet it is a call of its workspace (when its token names one), to be recorded.
 */
export function installRouterHooks(fastify: FastifyInstance, basePath: string, errors: ErrorRenderer, onCut: (request: FastifyRequest, startedAt: number) => void): void {
  // Requests no route takes (a bad URL, bytes the HTTP parser refuses) still get the router's answer on its paths.
  mountErrorRenderer(fastify, `${basePath}/v1/models`, errors);
  // Callbacks, not async hooks: they run on every request (see installHttpHooks).
  fastify.addHook('onRequest', (request, reply, done) => {
    if (isRouterPath(request.url, basePath)) reply.header('x-service-request-id', serviceRequestId(request));
    if (request.method === 'POST' && isRouterPath(request.url, basePath)) {
      readAsTextUnlessJson(request);
      const startedAt = Date.now();
      // A request closes once read whole; closed before that, its body was cut off.
      request.raw.once('close', () => {
        if (!request.raw.complete) onCut(request, startedAt);
      });
    }
    done();
  });
}
