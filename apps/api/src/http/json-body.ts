import type { FastifyRequest } from 'fastify';
import { ApiError } from '#libs/contracts';

/** v2 JSON routes: the body must be declared as JSON and be an object. */
export function requireJsonObject(request: FastifyRequest, body: unknown): Record<string, unknown> {
  const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json' && !type.endsWith('+json')) {
    throw new ApiError('unsupported_media_type', 'Send the body as application/json.');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw ApiError.invalid('The body must be a JSON object.');
  return body as Record<string, unknown>;
}
