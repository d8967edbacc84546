import compress from '@fastify/compress';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { RouteFlags } from './route-flags.js';

/** Below this an answer goes as it is: the encoding would save a few bytes and cost a few µs. */
export const COMPRESSION_THRESHOLD_BYTES = 1024;

// JSON, text (the engine's logs, the metrics, the docs page), XML and SVG, scripts and styles.
// Never `text/event-stream`: an encoder holds bytes back until it has enough, and each event must
// reach the client when it happens. Never images, audio, video or octet-stream: already
// compressed, or bytes we know nothing about.
const COMPRESSIBLE = /^(?:text\/(?!event-stream)|application\/(?:[a-z0-9.+-]+\+)?(?:json|xml)\b|application\/(?:javascript|x-ndjson)\b|[a-z]+\/[a-z0-9.+-]+\+(?:json|xml)\b)/i;

/** Whether an answer of this media type is worth encoding. */
export function isCompressible(contentType: string): boolean {
  return COMPRESSIBLE.test(contentType.trim());
}

/**
 * For a handler that sends stored bytes (a blob, an asset, an engine file) as they are: they
 * keep their length, their ETag (the hash of those bytes) and their byte ranges, so the route
 * is never encoded, whatever the media type.
 */
export const Uncompressed = (): MethodDecorator => RouteFlags({ compress: false });

/**
 * gzip or brotli (`Accept-Encoding`, brotli first when both are accepted) for answers of a
 * compressible type and at least 1 KiB. Register before any route is added (Nest adds its own
 * at init): the plugin attaches itself to each route as the route is added.
 */
export async function installCompression(app: NestFastifyApplication): Promise<void> {
  const fastify = app.getHttpAdapter().getInstance();
  // Nest passes a handler's `@RouteConfig` as the route's `config`; the plugin reads its own
  // route option, which Nest has no decorator for.
  fastify.addHook('onRoute', (route) => {
    if ((route.config as { compress?: unknown } | undefined)?.compress === false) route.compress = false;
  });
  await app.register(compress, {
    encodings: ['br', 'gzip'],
    threshold: COMPRESSION_THRESHOLD_BYTES,
    customTypes: isCompressible,
    // Request bodies are read as sent: a client that encodes one gets the answer it gets today.
    globalDecompression: false,
  });
}
