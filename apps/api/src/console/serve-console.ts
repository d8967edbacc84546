import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';

/** Where `scripts/install.sh` builds the console (apps/console): dist/console, beside dist/apps. */
export const CONSOLE_DIR = fileURLToPath(new URL('../../../../console/', import.meta.url));

/**
 * The page's Content-Security-Policy: its own scripts and styles only (no inline script, no eval;
 * WebAssembly compiles for the in-page blake3), and no connection, image or media beyond the API's
 * origin, except signed output URLs where the blob store serves them (the S3 endpoint's origin;
 * the local store's URLs are on the API's own origin). Previews arrive as data: URLs; files the
 * page makes itself (a workflow to download) as blob: URLs.
 */
export function consoleCsp(config: Config): string {
  const signed = config.storage.driver === 's3' ? ` ${new URL(config.storage.publicEndpoint).origin}` : '';
  return [
    "default-src 'self'",
    "script-src 'self' 'wasm-unsafe-eval'",
    "style-src 'self'",
    `img-src 'self' blob: data:${signed}`,
    `media-src 'self' blob: data:${signed}`,
    `connect-src 'self'${signed}`,
    "font-src 'self'",
    "object-src 'none'",
    "frame-src 'none'",
    "worker-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** Vite names what it builds under assets/ by a hash of the content: such a file never changes. */
export function cacheControlFor(path: string): string {
  return /[\\/]assets[\\/][^\\/]+-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$/.test(path) ? 'public, max-age=31536000, immutable' : 'no-store';
}

/**
 * The tenant console (apps/console, a static single-page app) at `<BASE_PATH>/console/`: on every
 * surface, under a deployment's prefix as well (the prefix is routed away before this), and
 * without any credential, since the page holds none: it asks for an API key and keeps it in the
 * tab's sessionStorage. `/console` redirects to `/console/` so that the page's relative asset
 * links resolve under whatever prefix it was reached by.
 */
export function mountConsole(app: NestFastifyApplication, config: Config, dir = CONSOLE_DIR): void {
  const prefix = `${config.api.basePath}/console`;
  const csp = consoleCsp(config);
  const built = existsSync(`${dir}/index.html`);
  // Not awaited: the plugin loads with the others when the app starts, as the docs page's does.
  void app.register(async (scope: FastifyInstance) => {
    // Relative, so the redirect keeps whatever prefix (a deployment's, a proxy's) the browser used.
    scope.get(prefix, (_request, reply) => reply.header('cache-control', 'no-store').redirect('console/', 308));
    if (!built) {
      scope.get(`${prefix}/*`, () => {
        throw new ApiError('not_found', 'The console is not built on this server: scripts/install.sh builds it.');
      });
      return;
    }
    await scope.register(fastifyStatic, {
      root: dir,
      prefix: `${prefix}/`,
      decorateReply: false,
      index: ['index.html'],
      cacheControl: false,
      etag: true,
      lastModified: false,
      serveDotFiles: false,
      setHeaders: (reply: FastifyReply, path: string) => {
        reply.header('cache-control', cacheControlFor(path));
        reply.header('content-security-policy', csp);
        reply.header('x-content-type-options', 'nosniff');
        reply.header('referrer-policy', 'no-referrer');
        reply.header('cross-origin-opener-policy', 'same-origin');
      },
    });
  });
}
