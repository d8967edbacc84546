import { FASTIFY_ROUTE_CONFIG_METADATA } from '@nestjs/platform-fastify/constants.js';
import type { FastifyRequest } from 'fastify';

// Facts a route declares about itself for the HTTP layer's hooks (which renderer answers its
// errors, whether it waits by design, whether its raw JSON bytes are kept), carried in the Fastify
// route config Nest builds from a handler's metadata: the hooks read them from
// `request.routeOptions.config` and never need to know which feature owns a URL.

type RouteFlags = Record<string, unknown>;

/** Merges `flags` into the Fastify route config of one handler, keeping what other decorators put there. */
export function addRouteConfig(handler: object, flags: RouteFlags): void {
  const current = (Reflect.getMetadata(FASTIFY_ROUTE_CONFIG_METADATA, handler) ?? {}) as RouteFlags;
  Reflect.defineMetadata(FASTIFY_ROUTE_CONFIG_METADATA, { ...current, ...flags }, handler);
}

/** A route's flag, as the route declared it (undefined before routing or when unset). */
export function routeFlag(request: FastifyRequest, flag: string): unknown {
  return (request.routeOptions?.config as unknown as RouteFlags | undefined)?.[flag];
}

/** Method decorator: merges `flags` into the route's config (Nest's `@RouteConfig` would replace it). */
export function RouteFlags(flags: RouteFlags): MethodDecorator {
  return (_target, _key, descriptor) => {
    addRouteConfig(descriptor.value as object, flags);
    return descriptor;
  };
}

/**
 * The route holds its request open for as long as its work takes (a router call), holding no CPU:
 * load shedding does not count it among the requests in flight.
 */
export const WaitsByDesign = (): MethodDecorator => RouteFlags({ waitsByDesign: true });

/** The JSON parser keeps the body's exact bytes for the route (`rawJsonBody`). */
export const KeepsRawJson = (): MethodDecorator => RouteFlags({ keepsRawJson: true });
