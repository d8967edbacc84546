import type { FastifyReply } from 'fastify';

/**
 * The engine's plain answers (aiohttp `web.Response(status, text)`): a short text body. `reason`
 * also replaces the status line's reason phrase, as the engine does for a file it cannot write:
 * the ComfyUI front end shows that phrase (`statusText`) in its error toast.
 */
export function engineText(reply: FastifyReply, status: number, text: string, reason?: string): FastifyReply {
  if (reason) reply.raw.statusMessage = reason.replace(/[^\u0020-\u007e]/g, ' ').slice(0, 200);
  return reply.status(status).type('text/plain; charset=utf-8').send(text);
}

/** `web.json_response(value)`: any JSON value, strings and null included, with the engine's media type. */
export function engineJson(reply: FastifyReply, value: unknown, status = 200): FastifyReply {
  return reply.status(status).type('application/json; charset=utf-8').send(JSON.stringify(value));
}

/** The first value of a query parameter, as aiohttp's `query.get` reads it. */
export function queryValue(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  const first = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? first : undefined;
}
