import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

// The one way every process of the service logs: JSON lines on stdout through pino, with the same
// redaction everywhere. The API's Fastify builds its request logger from `loggerOptions`; its
// services, the worker and the webhooks process log through `createLogger` and its children.

export type { Logger };

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/**
 * Credentials must never reach a log line, even if a future line passes them by mistake: a job's
 * extra_data and the partner keys it may carry, and the request headers that authenticate.
 * (`*.headers` covers plugins that log the request headers under their own key, like multipart's
 * busboyOptions at trace level.)
 */
const REDACT = [
  'extra_data',
  'extraData',
  'api_key_comfy_org',
  'auth_token_comfy_org',
  '*.api_key_comfy_org',
  '*.auth_token_comfy_org',
  'authorization',
  '*.authorization',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers.cookie',
  '*.headers.authorization',
  '*.headers["x-api-key"]',
  '*.headers.cookie',
];

export interface LoggerSettings {
  /** Fields on every line (role, worker_id). */
  base?: Record<string, unknown>;
  /** LOG_LEVEL. */
  level: string;
  /**
   * Keep info lines at quieter settings: the lifecycle lines ("listening", "ready") are what
   * supervisors and tests wait for, whatever the level.
   */
  keepLifecycle?: boolean;
  serializers?: LoggerOptions['serializers'];
}

/** pino's options as every process uses them; Fastify takes these to build its own logger. */
export function loggerOptions({ base, level, keepLifecycle = false, serializers }: LoggerSettings): LoggerOptions {
  const effective = keepLifecycle && level !== 'debug' && level !== 'trace' ? 'info' : level;
  return {
    level: effective,
    ...(base ? { base } : {}),
    redact: { paths: REDACT, censor: '[redacted]' },
    ...(serializers ? { serializers } : {}),
  };
}

let destination: DestinationStream | null = null;

/**
 * Where every logger of the process writes: stdout, one synchronous write per line. pino's
 * default writes from libuv's thread pool, and a trip there and back (futex calls, two context
 * switches) costs more than the write itself: a worker logs three lines a job. A line written is
 * also never lost when the process dies.
 */
export function logDestination(): DestinationStream {
  destination ??= pino.destination({ dest: 1, sync: true });
  return destination;
}

export function createLogger(settings: LoggerSettings): Logger {
  return pino(loggerOptions(settings), logDestination());
}

// The process's root logger, set once at start by its entry point; components log through
// children of it. Before that (unit tests) a default at LOG_LEVEL (info) stands in.
let root: Logger | null = null;

export function setProcessLogger(logger: Logger): void {
  root = logger;
}

export function processLogger(): Logger {
  root ??= createLogger({ level: process.env.LOG_LEVEL ?? 'info' });
  return root;
}

/** A part of the process (a service, a cache) logging under its name: `{component}` on every line. */
export function componentLogger(component: string): Logger {
  return processLogger().child({ component });
}

/** The worker's logger as a function: `log(level, msg, fields)`; `child(fields)` adds fields to every line (a job's lines carry job_id). */
export interface Log {
  (level: LogLevel, msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Log;
}

export function logFunction(logger: Logger): Log {
  const log = ((level: LogLevel, msg: string, fields: Record<string, unknown> = {}) => logger[level](fields, msg)) as Log;
  log.child = (fields) => logFunction(logger.child(fields));
  return log;
}
