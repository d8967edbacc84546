import { PATH_METADATA } from '@nestjs/common/constants.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorEnvelope } from '#libs/contracts';
import type { ErrorShape } from './error-body.js';
import { addRouteConfig, routeFlag } from './route-flags.js';

// Each surface owns how its errors look (v2 ErrorEnvelope, v1 engine bodies, the router's
// `{detail, error_type}`); this module only knows how to find the renderer of a request. Routed
// requests carry it in their Fastify route config (set by `@RendersErrors` on the controller);
// requests no route took (a bad URL, an unknown path, bytes that are not HTTP) fall back to the
// mount prefixes surfaces declare with `mountErrorRenderer`, then to the envelope.

export interface ErrorRenderer {
  /** Sends the error; `shape` is the generic mapping of `exception` (status, code, message, headers). */
  send(request: FastifyRequest, reply: FastifyReply, shape: ErrorShape, exception: unknown): FastifyReply;
  /** Headers and body for a connection refused before it became a request (no reply object exists). */
  raw(shape: ErrorShape): { headers: Record<string, string>; body: string };
}

/** The contract's ErrorEnvelope: the default of every route that declares nothing else. */
export const envelopeErrors: ErrorRenderer = {
  send(_request, reply, shape) {
    for (const [name, value] of Object.entries(shape.headers ?? {})) reply.header(name, value);
    return reply.status(shape.status).type('application/json; charset=utf-8').send(errorEnvelope(shape.code, shape.message, shape.details));
  },
  raw: (shape) => ({ headers: {}, body: JSON.stringify(errorEnvelope(shape.code, shape.message)) }),
};

/**
 * Class decorator: every route of the controller answers its errors through `renderer`. Class
 * decorators run after the method ones, so the routes (`@Get`, ...) are known by then.
 */
export function RendersErrors(renderer: ErrorRenderer): ClassDecorator {
  return (target) => {
    const proto = target.prototype as Record<string, unknown>;
    for (const name of Object.getOwnPropertyNames(proto)) {
      const handler = proto[name];
      if (typeof handler === 'function' && Reflect.getMetadata(PATH_METADATA, handler) !== undefined) addRouteConfig(handler, { errorRenderer: renderer });
    }
  };
}

type Mounts = { prefix: string; renderer: ErrorRenderer }[];

/** Requests under `prefix` that no route takes (and malformed ones) are answered by `renderer`. */
export function mountErrorRenderer(fastify: FastifyInstance, prefix: string, renderer: ErrorRenderer): void {
  const holder = fastify as FastifyInstance & { errorMounts?: Mounts };
  if (!holder.errorMounts) fastify.decorate('errorMounts', [] as Mounts);
  holder.errorMounts!.push({ prefix, renderer });
}

/** The renderer of a path no route took; `server` is the instance (or a child) mounts were declared on. */
export function mountedRenderer(server: object | undefined, path: string): ErrorRenderer {
  const mounts = (server as { errorMounts?: Mounts } | undefined)?.errorMounts ?? [];
  return mounts.find((m) => path.startsWith(m.prefix))?.renderer ?? envelopeErrors;
}

/** The renderer that answers this request's errors. */
export function rendererOf(request: FastifyRequest): ErrorRenderer {
  return (routeFlag(request, 'errorRenderer') as ErrorRenderer | undefined) ?? mountedRenderer(request.server, request.url);
}

/** Sends `shape` in the shape of the surface that serves `request`. */
export function sendError(request: FastifyRequest, reply: FastifyReply, shape: ErrorShape, exception?: unknown): FastifyReply {
  return rendererOf(request).send(request, reply, shape, exception ?? shape);
}
