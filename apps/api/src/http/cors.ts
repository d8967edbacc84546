import type { IncomingMessage } from 'node:http';
import type { FastifyCorsOptions } from '@fastify/cors';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';

/** Every method a surface routes (v1's userdata and logs use PUT, PATCH and DELETE). */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * What clients send beyond the CORS-safelisted headers. A browser only sends a header the
 * preflight allowed, and `*` would not cover `Authorization`, so they are named.
 */
export const CORS_REQUEST_HEADERS = [
  'Authorization', 'X-API-Key', 'Content-Type', 'Idempotency-Key', 'Prefer', 'Cancel-After', 'Last-Event-ID', 'If-None-Match', 'Range', 'X-Request-Id',
  // resumable uploads (tus)
  'Tus-Resumable', 'Upload-Length', 'Upload-Offset', 'Upload-Metadata', 'Upload-Defer-Length',
];

/**
 * What clients read beyond the safelisted response headers (Content-Type, Content-Length, …):
 * a script sees no other header of a cross-origin answer. Named one by one because a pattern
 * such as `X-Service-*` means nothing to a browser.
 */
export const CORS_EXPOSED_HEADERS = [
  'Location',
  'Retry-After',
  'X-Request-Id',
  'ETag',
  'Content-Disposition',
  'Content-Range',
  'Accept-Ranges',
  // v2 submissions
  'Idempotent-Replayed',
  'Preference-Applied',
  // resumable uploads (tus)
  'Tus-Resumable',
  'Tus-Version',
  'Tus-Extension',
  'Tus-Max-Size',
  'Upload-Offset',
  'Upload-Length',
  'Upload-Metadata',
  'Upload-Expires',
  // the router
  'X-Service-Request-Id',
  'X-Service-Error-Type',
  'X-Committed-Spend-Limit',
  'X-Committed-Spend-Current',
  'X-Committed-Spend-Remaining',
];

/** Browsers cache a preflight this long (Chromium caps it at two hours, Firefox at a day). */
export const CORS_MAX_AGE_SECONDS = 7200;

/** `@fastify/cors` settings for the configured origins; null when none are (no CORS at all). */
export function corsOptions(config: Config): FastifyCorsOptions | null {
  const origins = config.api.corsOrigins;
  if (origins !== '*' && origins.length === 0) return null;
  return {
    // A list answers with the caller's origin when it is listed (and `Vary: Origin`), and with no
    // Access-Control-Allow-Origin otherwise, which the browser takes as a refusal.
    origin: origins,
    methods: METHODS,
    allowedHeaders: CORS_REQUEST_HEADERS,
    exposedHeaders: CORS_EXPOSED_HEADERS,
    maxAge: CORS_MAX_AGE_SECONDS,
    // Credentials travel in headers, never in cookies: no Access-Control-Allow-Credentials.
    credentials: false,
  };
}

/** A browser's preflight, as opposed to an OPTIONS request a client sends for itself. */
function isPreflight(request: FastifyRequest): boolean {
  return request.method === 'OPTIONS' && request.headers.origin !== undefined && request.headers['access-control-request-method'] !== undefined;
}

/**
 * CORS on every route of every surface, through Nest's `enableCors()`, which runs `@fastify/cors`
 * first among the request hooks: a preflight is answered (204) before authentication and rate
 * limits, so it needs no credential and counts against nothing; and the headers are also put on
 * the Node response, so error answers and the hijacked event stream carry them too.
 */
export function installCors(app: NestFastifyApplication, config: Config): void {
  const options = corsOptions(config);
  if (!options) return;
  const preflight = { ...options, preflight: true };
  const other = { ...options, preflight: false };
  // Any other OPTIONS goes on to the routes and gets what they answer (the router's 405, a 404
  // elsewhere), not the plugin's plain-text 400, which is in none of the surfaces' shapes.
  app.enableCors({ delegator: (request, done) => done(null, isPreflight(request) ? preflight : other) });
}

/**
 * Whether a WebSocket upgrade may proceed. Browsers apply no CORS to WebSockets, so the server
 * checks `Origin` itself, when origins are configured: allowed are a listed origin, the API's
 * own (PUBLIC_URL, or the request's host: a page it serves, or a client library that sends its
 * target as the origin, as Python's websocket-client does), and no `Origin` at all (not a browser). With `*` or no configuration every upgrade may proceed.
 */
export function upgradeOriginAllowed(config: Config, request: IncomingMessage): boolean {
  const origins = config.api.corsOrigins;
  const origin = request.headers.origin;
  if (origins === '*' || origins.length === 0 || origin === undefined) return true;
  if (origins.includes(origin)) return true;
  if (config.api.publicUrl && new URL(config.api.publicUrl).origin === origin) return true;
  if (!URL.canParse(origin)) return false;
  const host = request.headers.host?.toLowerCase();
  return host !== undefined && new URL(origin).host === host;
}
