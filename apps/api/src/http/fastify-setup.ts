import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { LogController, type FastifyHttpOptions, type FastifyInstance } from 'fastify';
import type { Config } from '#libs/config';
import { logDestination, loggerOptions } from '#libs/logging';
import { httpRequestObserved } from '#libs/metrics';
import type { Draining } from '../core/draining.js';
import { requestUrlRewriter } from '../surface/request-scope.js';
import { frameworkErrorShape, rejectMalformedClient } from './error-body.js';
import { sendError } from './error-renderer.js';
import { requestLogger } from './request-logger.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;
// v2 `/jobs/{id}`, v1 `/job/{id}/status` and `/history/{id}`: the job a request is about.
const JOB_IN_URL = /\/(?:jobs|job|history)\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?=[/?#]|$)/i;

/** The job id a request URL names, for its log lines; null when it names none. */
export function jobIdOfUrl(url: string): string | null {
  return JOB_IN_URL.exec(url)?.[1]?.toLowerCase() ?? null;
}

/** Removes credentials that may travel in a query string (`?token=` of the v1 WebSocket, a client's `?api_key=`). */
export function redactUrl(url: string): string {
  return url.replace(/([?&](?:token|access_token|api_key|apikey|api-key|key|auth|authorization|password|secret|sig|signature)=)[^&#]*/gi, '$1[redacted]');
}

export function fastifyOptions(config: Config): FastifyHttpOptions<Server> {
  return {
    bodyLimit: config.maxJsonBodyBytes,
    // request.ip (the brute-force guard's client address) looks behind this many trusted proxies.
    trustProxy: config.api.trustProxyHops > 0 ? (_address: string, hop: number) => hop < config.api.trustProxyHops : false,
    // A client may pass its own request id; anything odd is replaced rather than echoed.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    requestIdHeader: false,
    rewriteUrl: requestUrlRewriter(config),
    // The engine's user-data routes take a whole percent-encoded path as one segment
    // (`/api/userdata/workflows%2Fa%20long%20name.json`); Fastify's default cap of 100 characters
    // would refuse ordinary workflow names. Longer than this is still a 414.
    routerOptions: { maxParamLength: 4096 },
    // Per-request lines would dominate the log at load; errors are logged where they happen.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    // No connection is closed for being quiet: event streams, `Prefer: wait` and router calls stay
    // silent for minutes by design. Clients that send slowly, or stop sending, are cut off by the
    // deadlines for the headers and for the whole request instead (408, then the socket closes).
    connectionTimeout: 0,
    requestTimeout: config.http.requestTimeoutMs,
    http: { headersTimeout: config.http.headersTimeoutMs, connectionsCheckingInterval: config.http.timeoutCheckMs },
    // Bad percent-encoding or an over-long path parameter is found before any route runs, so no
    // onRequest hook has put the request ids on the response.
    frameworkErrors: (error, request, reply) => {
      reply.header('x-request-id', request.id);
      sendError(request, reply, frameworkErrorShape(error), error);
    },
    // Malformed HTTP and clients past a deadline never become requests; they get their surface's shape too.
    clientErrorHandler: rejectMalformedClient,
    // Every line logged while serving a request about a job carries its job_id (next to request_id).
    // Made when the request first logs (requestLogger): most never do.
    childLoggerFactory(logger, bindings, options, rawReq) {
      const url = rawReq.url ?? '';
      return requestLogger(
        logger as Logger,
        () => {
          const jobId = jobIdOfUrl(url);
          return jobId ? { ...bindings, job_id: jobId } : bindings;
        },
        options,
      );
    },
    keepAliveTimeout: 65_000,
    // A request that reaches a stopping replica on a kept-alive connection is served (Redis and the
    // database are still there) and its answer closes the connection; Fastify's own 503 would not
    // be in the error envelope.
    return503OnClosing: false,
    // The shared pino options (libs/logging: level and redaction as every process has them).
    logger: {
      ...loggerOptions({
        level: config.logLevel,
        serializers: {
          req: (req: { id: string; method: string; url: string }) => ({ id: req.id, method: req.method, url: redactUrl(req.url) }),
        },
      }),
      stream: logDestination(),
    },
  };
}

/** Hooks every response passes through, whichever surface served it. */
export function installHttpHooks(fastify: FastifyInstance, stop: Draining): void {
  // Hooks every request runs are callbacks, not async functions: an async hook costs each request
  // a promise and a hop through the microtask queue, for work that never waits.
  fastify.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  // While the process stops, an answer closes its connection: a kept-alive idle connection would
  // otherwise hold the stop up until the client drops it, and the client's next request belongs on
  // another replica.
  fastify.addHook('onSend', (_request, reply, payload, done) => {
    if (stop.draining) reply.header('connection', 'close');
    done(null, payload);
  });
  // Labelled by the route template (`/api/v2/jobs/:id`), never the raw URL, to keep series bounded.
  fastify.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    httpRequestObserved(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
    // Off by default (see logController above); LOG_LEVEL=debug traces every request.
    if (request.log.level === 'debug' || request.log.level === 'trace') {
      request.log.debug({ method: request.method, url: redactUrl(request.url), route, status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request completed');
    }
    done();
  });
  // Errors raised before a Nest handler runs (body parsing, limits) reach the global exception
  // filter through the error handler Nest installs on Fastify, so they leave in the same shapes.
}
