import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';

/** Scheme and authority the client used (or PUBLIC_URL when configured): links resolve against it. */
export function requestOrigin(request: FastifyRequest, config: Config): string {
  if (config.api.publicUrl) return config.api.publicUrl;
  const host = request.headers.host && /^[A-Za-z0-9.:[\]-]+$/.test(request.headers.host) ? request.headers.host : `${config.api.host}:${config.api.port}`;
  return `${request.protocol}://${host}`;
}
