import type { FastifyRequest } from 'fastify';
import type { ErrorShape } from '../http/error-body.js';
import type { ErrorRenderer } from '../http/error-renderer.js';
import { RouterError, RouterValidationError } from './errors.js';
import { serviceRequestId } from './request-context.js';

// The router's errors leave as RouterErrorResponse `{detail, error_type}` (or the 422 validation
// body `{detail: [...]}`) with `X-Service-Error-Type` and `X-Service-Request-Id`; anything else
// thrown on a router route is mapped onto one of its 15 buckets.

/** Router bodies use the router's 15 buckets; map generic failures onto them. */
function routerErrorType(shape: ErrorShape): string {
  if (shape.status === 401) return 'unauthorized';
  if (shape.status === 403) return shape.code === 'not_enabled' ? 'not_enabled' : 'forbidden';
  if (shape.status === 404) return 'model_not_found';
  if (shape.status === 503) return 'service_unavailable';
  if (shape.status === 429) return shape.code === 'rate_limited' ? 'rate_limited' : 'concurrency_limit_exceeded';
  if (shape.status >= 400 && shape.status < 500) return 'invalid_input';
  return 'internal_error';
}

/** The server-generated call id, also on errors Fastify raised before the router's hook ran. */
function withRequestId(request: FastifyRequest, headers: Record<string, string>): Record<string, string> {
  return { 'x-service-request-id': serviceRequestId(request), ...headers };
}

export const routerErrors: ErrorRenderer = {
  send(request, reply, shape, exception) {
    reply.type('application/json; charset=utf-8');
    if (exception instanceof RouterValidationError) {
      return reply.status(422).headers(withRequestId(request, { 'x-service-error-type': exception.bucket })).send({ detail: exception.entries });
    }
    if (exception instanceof RouterError) {
      return reply
        .status(exception.status)
        .headers(withRequestId(request, { ...exception.headers, 'x-service-error-type': exception.bucket }))
        .send({ detail: exception.detail, error_type: exception.bucket });
    }
    const errorType = routerErrorType(shape);
    return reply
      .status(shape.status)
      .headers(withRequestId(request, { ...shape.headers, 'x-service-error-type': errorType }))
      .send({ detail: shape.message, error_type: errorType });
  },
  raw(shape) {
    const errorType = routerErrorType(shape);
    return {
      headers: { 'X-Service-Request-Id': crypto.randomUUID(), 'X-Service-Error-Type': errorType },
      body: JSON.stringify({ detail: shape.message, error_type: errorType }),
    };
  },
};
