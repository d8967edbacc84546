/** Reply helpers: JSON written like the engine (Python formatting), empty 200s, clear 400s. */
import { parseLosslessJson } from '#libs/contracts';
import type { FastifyReply } from 'fastify';
import { pythonJsonDumps } from '#libs/engine-protocol';

export function sendJson(reply: FastifyReply, body: unknown, status = 200): FastifyReply {
  return reply.code(status).header('content-type', 'application/json; charset=utf-8').send(pythonJsonDumps(body));
}

/** The engine's `web.Response(status=...)`: no body. */
export function sendEmpty(reply: FastifyReply, status = 200): FastifyReply {
  return reply.code(status).header('content-type', 'application/octet-stream').send('');
}

export class BadJsonError extends Error {}

/** Parse a raw body the engine would read with request.json(). */
export function parseJsonBody(body: unknown): unknown {
  const text = typeof body === 'string' ? body : Buffer.isBuffer(body) ? body.toString('utf8') : body === undefined || body === null ? '' : String(body);
  try {
    // Python's json keeps integers whole, whatever their size (seeds range to 2^64 - 1).
    return parseLosslessJson(text);
  } catch (err) {
    throw new BadJsonError(text.trim() === '' ? 'Request body is empty' : `Request body is not valid JSON: ${(err as Error).message}`);
  }
}

/** Our deliberate difference from the engine (which answers 500): a 400 saying what is wrong. */
/** The body as JSON; or, for a body that is not JSON, the 400 already sent. */
export function readJsonBody(body: unknown, reply: FastifyReply): { json: unknown; answered?: undefined } | { answered: FastifyReply } {
  try {
    return { json: parseJsonBody(body) };
  } catch (err) {
    if (err instanceof BadJsonError) return { answered: sendBadJson(reply, err) };
    throw err;
  }
}

export function sendBadJson(reply: FastifyReply, err: BadJsonError): FastifyReply {
  return sendJson(
    reply,
    { error: { type: 'invalid_json', message: 'Request body is not valid JSON', details: err.message, extra_info: {} }, node_errors: {} },
    400,
  );
}

export function sendBadRequest(reply: FastifyReply, type: string, message: string, details = ''): FastifyReply {
  return sendJson(reply, { error: { type, message, details, extra_info: {} }, node_errors: {} }, 400);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
