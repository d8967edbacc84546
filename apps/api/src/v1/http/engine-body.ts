import type { FastifyInstance } from 'fastify';
import { envelopeErrors, type ErrorRenderer } from '../../http/error-renderer.js';
import { MAX_JSON_DEPTH, jsonNestsDeeperThan } from '../../http/json-body.js';

/** The engine's 400 body: `{error: {type, message, details, extra_info}, node_errors}`. */
export function engineErrorBody(type: string, message: string, details = '', nodeErrors: Record<string, unknown> = {}) {
  return { error: { type, message, details, extra_info: {} }, node_errors: nodeErrors };
}

export class BadBody extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly details: string,
  ) {
    super(message);
  }
}

/** A refusal the engine answers as plain text (aiohttp `web.Response(status, text)`), such as the user folder's. */
export class EngineTextRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * v1 routes answer a body the engine would refuse (BadBody) in the engine's own 400 shape, so
 * ComfyUI clients show it as they would the engine's, and the engine's plain-text refusals
 * (EngineTextRefusal) as text; every other error (credentials, limits, not found) is the
 * contract's ErrorEnvelope.
 */
export const v1Errors: ErrorRenderer = {
  send(request, reply, shape, exception) {
    if (exception instanceof BadBody) {
      return reply.status(400).type('application/json; charset=utf-8').send(engineErrorBody(exception.type, exception.message, exception.details));
    }
    if (exception instanceof EngineTextRefusal) return reply.status(exception.status).type('text/plain; charset=utf-8').send(exception.message);
    return envelopeErrors.send(request, reply, shape, exception);
  },
  raw: envelopeErrors.raw,
};

/**
 * v1 JSON bodies arrive as text (see `acceptAnyJsonBody`). Empty means `{}`; anything that does
 * not parse as JSON (or nests absurdly deep) is a clear 400, never the engine's 500.
 */
export function parseJsonText(body: unknown): unknown {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'string') return body;
  if (body.trim() === '') return {};
  if (jsonNestsDeeperThan(body, MAX_JSON_DEPTH)) {
    throw new BadBody('invalid_request', 'Request body nests too deeply', `The JSON body nests deeper than ${MAX_JSON_DEPTH} levels.`);
  }
  try {
    return JSON.parse(body) as unknown;
  } catch (err) {
    throw new BadBody('invalid_json', 'Request body is not valid JSON', `The request body is not valid JSON: ${(err as Error).message.slice(0, 200)}`);
  }
}

export function parseJsonObject(body: unknown): Record<string, unknown> {
  const value = parseJsonText(body);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new BadBody('invalid_request', 'The request body must be a JSON object', `got ${Array.isArray(value) ? 'an array' : typeof value}`);
  }
  return value as Record<string, unknown>;
}

/**
 * ComfyUI clients post JSON as `text/plain;charset=UTF-8` (a browser's fetch default, and what
 * SDKs that replace their headers send) or with no content type at all. For the v1 JSON routes
 * every non-multipart body is read as text and parsed by the route, so each of these works and a
 * body that is not JSON gets the engine's 400 shape instead of a framework error.
 */
export function acceptAnyJsonBody(fastify: FastifyInstance, basePath: string, paths: string[]): void {
  const routes = new Set(paths.map((p) => `${basePath}${p}`));
  // A callback hook, not an async one: it runs on every request (see installHttpHooks).
  fastify.addHook('onRequest', (request, _reply, done) => {
    if (request.method === 'POST' && routes.has(request.url.split('?')[0]!)) {
      const raw = request.raw.headers;
      if (!(raw['content-type'] ?? '').toLowerCase().startsWith('multipart/')) raw['content-type'] = 'text/plain; charset=utf-8';
    }
    done();
  });
}
