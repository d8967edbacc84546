import type { FastifyReply } from 'fastify';
import { BadBody, engineErrorBody } from '../http/engine-body.js';

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

/** Runs a body parser of `engine-body`; a bad body is answered with the engine's 400 and gives null. */
export function parsedOr400<T>(reply: FastifyReply, parse: () => T): { value: T } | null {
  try {
    return { value: parse() };
  } catch (err) {
    if (!(err instanceof BadBody)) throw err;
    void reply.status(400).send(engineErrorBody(err.type, err.message, err.details));
    return null;
  }
}
