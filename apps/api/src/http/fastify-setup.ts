import { randomUUID } from 'node:crypto';
import { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Config } from '#libs/config';
import { deploymentRewriter } from '../surface/request-scope.js';
import { sendError, toErrorShape } from './error-body.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** Removes credentials that may travel in a query string (`?token=` of the v1 WebSocket). */
export function redactUrl(url: string): string {
  return url.replace(/([?&](?:token|access_token|sig)=)[^&]*/gi, '$1[redacted]');
}

export function fastifyOptions(config: Config): FastifyServerOptions {
  return {
    bodyLimit: config.maxJsonBodyBytes,
    // A client may pass its own request id; anything odd is replaced rather than echoed.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    requestIdHeader: false,
    rewriteUrl: deploymentRewriter(config),
    // Per-request lines would dominate the log at load; errors are logged where they happen.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    connectionTimeout: 0,
    requestTimeout: 120_000,
    keepAliveTimeout: 65_000,
    logger: {
      level: config.logLevel,
      redact: {
        paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie', 'headers.authorization', 'headers["x-api-key"]'],
        censor: '[redacted]',
      },
      serializers: {
        req: (req: { id: string; method: string; url: string }) => ({ id: req.id, method: req.method, url: redactUrl(req.url) }),
      },
    },
  };
}

/** Hooks every response passes through, whichever surface served it. */
export function installHttpHooks(fastify: FastifyInstance, config: Config): void {
  fastify.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // Errors raised before a Nest handler runs (body parsing, limits) get the same shapes.
  fastify.setErrorHandler((error, request, reply) => {
    const shape = toErrorShape(error);
    if (shape.unexpected) request.log.error({ err: error }, 'unexpected error');
    return sendError(request, reply, shape, config.api.basePath);
  });
}
