import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';

/** Scheme and authority the client used (or PUBLIC_URL when configured): links resolve against it. */
export function requestOrigin(request: FastifyRequest, config: Config): string {
  if (config.api.publicUrl) return config.api.publicUrl;
  // A Host header that is missing or could carry anything else falls back to where this server listens.
  const host = request.headers.host && /^[A-Za-z0-9.:[\]-]+$/.test(request.headers.host) ? request.headers.host : `${config.api.host}:${request.socket.localPort ?? config.api.port}`;
  return `${request.protocol}://${host}`;
}
