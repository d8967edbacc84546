import { isIPv4 } from 'node:net';
import { z } from 'zod';

// Every environment variable the project reads, with its default. `.env.example` is checked
// against this table by a test, so the two never drift apart.
export const ENV_DEFAULTS = {
  NODE_ENV: 'development',
  LOG_LEVEL: 'info',
  DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/comfy_cloud',
  // Named (cached) statements; false behind a pooler that cannot keep them (PgBouncer in transaction mode before 1.21).
  DATABASE_PREPARED_STATEMENTS: 'true',
  REDIS_URL: 'redis://127.0.0.1:6379',
  REDIS_PREFIX: 'cc',
  API_HOST: '127.0.0.1',
  API_PORT: '8080',
  // Proxy hops in front of the API whose X-Forwarded-For is believed (0: the peer address is the client).
  TRUST_PROXY_HOPS: '0',
  PUBLIC_URL: '',
  SURFACE: 'cloud',
  BASE_PATH: '',
  // Origins whose pages may call the API from a browser (CORS): comma-separated, or `*` for any.
  // Empty: no CORS headers at all, so browsers only reach the API from its own origin.
  CORS_ALLOWED_ORIGINS: '',
  DEPLOYMENT_DOMAIN: '',
  SELF_HOSTED_TOKEN: '',
  OPERATOR_TOKEN: '',
  // Failed authentications one client address may make per window before it gets 429 (0: no limit).
  AUTH_FAILURE_LIMIT: '50',
  AUTH_FAILURE_WINDOW_SECONDS: '300',
  SIGNING_SECRET: 'dev-only-signing-secret-change-me',
  SIGNED_URL_TTL_SECONDS: '3600',
  MAX_UPLOAD_BYTES: String(100 * 1024 * 1024),
  // Resumable uploads (tus, /api/v2/uploads): the largest file, and how long an unfinished one is kept.
  MAX_RESUMABLE_UPLOAD_BYTES: String(10 * 1024 ** 3),
  RESUMABLE_UPLOAD_EXPIRY_SECONDS: String(24 * 3600),
  // Imports by URL (POST /api/v2/assets/from-url): the largest file, and how long one may take.
  URL_IMPORT_MAX_BYTES: String(10 * 1024 ** 3),
  URL_IMPORT_TIMEOUT_SECONDS: '1800',
  // Outbound requests (imports by URL, webhook deliveries) may reach loopback addresses: for tests and `npm start` only.
  // Private, link-local and metadata addresses are refused always.
  OUTBOUND_ALLOW_LOOPBACK: 'false',
  MAX_JSON_BODY_BYTES: String(8 * 1024 * 1024),
  // v1 user data (the engine's user folder: saved workflows, settings): one file, and one account's total.
  USERDATA_MAX_FILE_BYTES: String(10 * 1024 * 1024),
  USERDATA_MAX_ACCOUNT_BYTES: String(100 * 1024 * 1024),
  USERDATA_MAX_FILES: '10000',
  // A client must have sent its whole request (headers and body) within these, or it gets 408.
  HTTP_HEADERS_TIMEOUT_MS: '30000',
  HTTP_REQUEST_TIMEOUT_MS: '120000',
  // How often the server looks for clients past those deadlines.
  HTTP_TIMEOUT_CHECK_MS: '2000',
  // Connections the kernel holds for the API while it is busy (capped by net.core.somaxconn). Past
  // it new connections are dropped, and clients see resets rather than answers.
  HTTP_LISTEN_BACKLOG: '4096',
  // Load shedding (docs/operations.md): past any of these (0: that check is off), new requests get
  // 503 service_unavailable with Retry-After; /healthz, /readyz and /metrics are always served,
  // and streams already open are left alone. The event loop's figures are means over a sample.
  OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '200',
  // Off: a replica keeping up with its load runs at full utilization (1.0 with a 15 ms loop delay
  // under the load suite), so utilization alone says nothing about latency.
  OVERLOAD_MAX_EVENT_LOOP_UTILIZATION: '0',
  // Of V8's heap limit (--max-old-space-size).
  OVERLOAD_MAX_HEAP_USED_FRACTION: '0.9',
  OVERLOAD_SAMPLE_INTERVAL_MS: '1000',
  // Requests being served at once (event streams, `Prefer: wait` and router calls aside): refused
  // at once past it, between two samples.
  OVERLOAD_MAX_REQUESTS_IN_FLIGHT: '1024',
  // New connections waiting in the kernel's accept queue (Linux): the queue a replica builds when
  // connections come faster than it takes them in, which no figure of the process shows.
  OVERLOAD_MAX_ACCEPT_QUEUE: '128',
  OVERLOAD_RETRY_AFTER_SECONDS: '2',
  // /readyz proves the blob store takes writes (a small write and delete) at most this often; checks
  // in between reuse the last result.
  STORAGE_WRITE_PROBE_INTERVAL_MS: '5000',
  // On SIGTERM the API lets requests in flight (router calls above all) finish for this long, then
  // they stop waiting and the process exits. Keep it under the orchestrator's grace period.
  API_SHUTDOWN_GRACE_MS: '20000',
  STORAGE_DRIVER: 'local',
  STORAGE_DIR: '.data/blobs',
  S3_ENDPOINT: '',
  S3_PUBLIC_ENDPOINT: '',
  S3_REGION: 'us-east-1',
  S3_BUCKET: 'comfy-cloud',
  S3_ACCESS_KEY_ID: '',
  S3_SECRET_ACCESS_KEY: '',
  S3_FORCE_PATH_STYLE: 'true',
  S3_REQUEST_TIMEOUT_MS: '30000',
  JOB_RETENTION_SECONDS: String(7 * 24 * 3600),
  JOB_QUEUE_TIMEOUT_SECONDS: String(24 * 3600),
  JOB_EXECUTION_TIMEOUT_SECONDS: String(3600),
  CREDITS_PER_SECOND: '1',
  CAPTURE_LOGS: 'true',
  SSE_KEEPALIVE_MS: '15000',
  PREFER_WAIT_MAX_SECONDS: '60',
  ENGINE_URL: 'http://127.0.0.1:8188',
  ENGINE_STALL_TIMEOUT_MS: '60000',
  // The engine's input folder as the worker sees it (a shared volume), or empty: then staged inputs
  // stay there, in a folder no listing shows and no other tenant can name (docs/operations.md).
  ENGINE_INPUT_DIR: '',
  // The engine's output folder as the worker sees it (a shared volume), or empty: outputs are then
  // read from the disk rather than through the engine's GET /view (no HTTP hop; large ones go faster).
  ENGINE_OUTPUT_DIR: '',
  // The engine's `models` folder as the worker sees it (a shared volume): tenants' model files are
  // linked into it for their jobs. Empty: jobs that name a tenant's model file fail (models_unavailable).
  ENGINE_MODELS_DIR: '',
  // The worker's own cache of model files (content-addressed, least recently used evicted past the budget).
  MODEL_CACHE_DIR: '.data/model-cache',
  MODEL_CACHE_MAX_BYTES: String(50 * 1024 ** 3),
  // How often a worker drops cached files whose blobs are deleted (deletions are also announced at once).
  MODEL_CACHE_CHECK_SECONDS: '60',
  WORKER_ID: '',
  WORKER_HOST: '127.0.0.1',
  WORKER_PORT: '8081',
  WORKER_SHUTDOWN_GRACE_MS: '25000',
  JOB_MAX_ATTEMPTS: '3',
  LOG_CAPTURE_BYTES: String(64 * 1024),
  // Webhooks (docs/operations.md): the process that delivers them, and what it may call.
  WEBHOOK_HOST: '127.0.0.1',
  // Its /healthz, /readyz and /metrics.
  WEBHOOK_PORT: '8082',
  // One attempt's deadline: connect, send, answer.
  WEBHOOK_TIMEOUT_MS: '10000',
  // What is read of a receiver's answer; the rest is not.
  WEBHOOK_MAX_RESPONSE_BYTES: '4096',
  // Multiplies the retry schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h); under 1 for tests.
  WEBHOOK_RETRY_SCALE: '1',
  // An endpoint whose every attempt failed for this long is disabled.
  WEBHOOK_DISABLE_AFTER_SECONDS: String(5 * 24 * 3600),
  // Deliveries in flight at once per process.
  WEBHOOK_CONCURRENCY: '16',
  // How often the process looks for due deliveries besides being woken by new ones.
  WEBHOOK_POLL_INTERVAL_MS: '1000',
  ROUTER_JWT_SECRET: '',
  ROUTER_JWT_PUBLIC_KEYS: '',
  // Router tokens must carry `exp`, at most this far ahead (and from their `iat`): 30 days.
  ROUTER_TOKEN_MAX_LIFETIME_SECONDS: String(30 * 24 * 3600),
  ROUTER_DEADLINE_MS: String(10 * 60 * 1000),
  ROUTER_CATALOG_FILE: 'apps/api/src/router/catalog/data/catalog.json',
  // Comma-separated `provider=url`: replaces the origin (and prefixes the path) of that provider's
  // upstream URLs from the catalog, for tests, staging, operator proxies and the partner simulator.
  ROUTER_UPSTREAM_BASE_URLS: '',
  // The router's own credentials at each partner (docs/router.md says where each is made). A
  // provider without its key is not called: its models answer service_unavailable.
  ROUTER_BFL_API_KEY: '',
  ROUTER_OPENAI_API_KEY: '',
  ROUTER_STABILITY_API_KEY: '',
  ROUTER_RECRAFT_API_KEY: '',
  ROUTER_IDEOGRAM_API_KEY: '',
  // Kling signs its own short-lived tokens with these two.
  ROUTER_KLING_ACCESS_KEY: '',
  ROUTER_KLING_SECRET_KEY: '',
  ROUTER_LUMA_API_KEY: '',
  ROUTER_RUNWAY_API_KEY: '',
  ROUTER_MINIMAX_API_KEY: '',
  ROUTER_GOOGLE_API_KEY: '',
  ROUTER_ELEVENLABS_API_KEY: '',
} as const;

export type EnvName = keyof typeof ENV_DEFAULTS;

const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .regex(/^-?\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/** A decimal from 0 to 1 (`0.9`, `.98`, `1`). */
const fraction = z
  .string()
  .regex(/^(0|1|0?\.\d+|1\.0*)$/, 'must be a decimal from 0 to 1')
  .transform(Number);

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

const url = (protocols: string[]) =>
  z.string().refine((v) => {
    try {
      return protocols.includes(new URL(v).protocol);
    } catch {
      return false;
    }
  }, `must be a URL (${protocols.join(' or ')})`);

const optionalUrl = z.string().refine((v) => v === '' || URL.canParse(v), 'must be empty or a URL');

// A credential goes into an HTTP header as it is: one line of visible characters.
const providerKey = z.string().regex(/^[\x21-\x7e]{0,4096}$/, 'must be printable ASCII without spaces');

const schema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  DATABASE_URL: url(['postgresql:', 'postgres:']),
  DATABASE_PREPARED_STATEMENTS: bool,
  REDIS_URL: url(['redis:', 'rediss:']),
  REDIS_PREFIX: z.string().regex(/^[A-Za-z0-9_:.-]{1,64}$/, 'letters, digits, _ : . - only'),
  API_HOST: z.string().min(1),
  API_PORT: int(0, 65535),
  TRUST_PROXY_HOPS: int(0, 16),
  PUBLIC_URL: optionalUrl,
  SURFACE: z.enum(['cloud', 'deployment', 'self-hosted']),
  BASE_PATH: z
    .string()
    .regex(/^(\/[A-Za-z0-9._~-]+)*$/, 'must be empty or like /prefix (no trailing slash)'),
  CORS_ALLOWED_ORIGINS: z.string().refine((v) => parseCorsOrigins(v) !== null, 'must be empty, `*`, or origins such as https://app.example.com separated by commas'),
  DEPLOYMENT_DOMAIN: z.string(),
  SELF_HOSTED_TOKEN: z.string(),
  OPERATOR_TOKEN: z.string(),
  AUTH_FAILURE_LIMIT: int(0),
  AUTH_FAILURE_WINDOW_SECONDS: int(1, 24 * 3600),
  SIGNING_SECRET: z.string().min(16, 'must be at least 16 characters'),
  SIGNED_URL_TTL_SECONDS: int(1, 7 * 24 * 3600),
  MAX_UPLOAD_BYTES: int(1),
  MAX_RESUMABLE_UPLOAD_BYTES: int(1),
  RESUMABLE_UPLOAD_EXPIRY_SECONDS: int(60),
  URL_IMPORT_MAX_BYTES: int(1),
  URL_IMPORT_TIMEOUT_SECONDS: int(1, 24 * 3600),
  OUTBOUND_ALLOW_LOOPBACK: bool,
  MAX_JSON_BODY_BYTES: int(1024),
  USERDATA_MAX_FILE_BYTES: int(1, 1024 * 1024 * 1024),
  USERDATA_MAX_ACCOUNT_BYTES: int(1),
  USERDATA_MAX_FILES: int(1, 10_000_000),
  HTTP_HEADERS_TIMEOUT_MS: int(100, 3_600_000),
  HTTP_REQUEST_TIMEOUT_MS: int(100, 24 * 3_600_000),
  HTTP_TIMEOUT_CHECK_MS: int(10, 60_000),
  HTTP_LISTEN_BACKLOG: int(1, 65_535),
  OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: int(0, 60_000),
  OVERLOAD_MAX_EVENT_LOOP_UTILIZATION: fraction,
  OVERLOAD_MAX_HEAP_USED_FRACTION: fraction,
  OVERLOAD_SAMPLE_INTERVAL_MS: int(10, 60_000),
  OVERLOAD_MAX_REQUESTS_IN_FLIGHT: int(0, 1_000_000),
  OVERLOAD_MAX_ACCEPT_QUEUE: int(0, 1_000_000),
  OVERLOAD_RETRY_AFTER_SECONDS: int(1, 3600),
  STORAGE_WRITE_PROBE_INTERVAL_MS: int(0, 600_000),
  API_SHUTDOWN_GRACE_MS: int(0, 600_000),
  STORAGE_DRIVER: z.enum(['local', 's3']),
  STORAGE_DIR: z.string().min(1),
  S3_ENDPOINT: optionalUrl,
  S3_PUBLIC_ENDPOINT: optionalUrl,
  S3_REGION: z.string().min(1),
  S3_BUCKET: z.string().regex(/^[a-z0-9][a-z0-9.-]{2,62}$/, 'must be a valid bucket name'),
  S3_ACCESS_KEY_ID: z.string(),
  S3_SECRET_ACCESS_KEY: z.string(),
  S3_FORCE_PATH_STYLE: bool,
  S3_REQUEST_TIMEOUT_MS: int(100),
  JOB_RETENTION_SECONDS: int(60),
  JOB_QUEUE_TIMEOUT_SECONDS: int(1),
  JOB_EXECUTION_TIMEOUT_SECONDS: int(1),
  CREDITS_PER_SECOND: int(0),
  CAPTURE_LOGS: bool,
  SSE_KEEPALIVE_MS: int(100, 600_000),
  PREFER_WAIT_MAX_SECONDS: int(0, 600),
  ENGINE_URL: url(['http:', 'https:']),
  ENGINE_STALL_TIMEOUT_MS: int(100),
  ENGINE_INPUT_DIR: z.string(),
  ENGINE_OUTPUT_DIR: z.string(),
  ENGINE_MODELS_DIR: z.string(),
  MODEL_CACHE_DIR: z.string().min(1),
  MODEL_CACHE_MAX_BYTES: int(1),
  MODEL_CACHE_CHECK_SECONDS: int(1, 24 * 3600),
  WORKER_ID: z.string().regex(/^[A-Za-z0-9._-]{0,64}$/, 'letters, digits, . _ - only'),
  WORKER_HOST: z.string().min(1),
  WORKER_PORT: int(0, 65535),
  WORKER_SHUTDOWN_GRACE_MS: int(0),
  JOB_MAX_ATTEMPTS: int(1, 10),
  LOG_CAPTURE_BYTES: int(0, 10 * 1024 * 1024),
  WEBHOOK_HOST: z.string().min(1),
  WEBHOOK_PORT: int(0, 65535),
  WEBHOOK_TIMEOUT_MS: int(100, 120_000),
  WEBHOOK_MAX_RESPONSE_BYTES: int(0, 1024 * 1024),
  WEBHOOK_RETRY_SCALE: z.string().regex(/^(\d+(\.\d+)?|\.\d+)$/, 'must be a decimal such as 1 or 0.01').transform(Number).pipe(z.number().min(0).max(100)),
  WEBHOOK_DISABLE_AFTER_SECONDS: int(1),
  WEBHOOK_CONCURRENCY: int(1, 1000),
  WEBHOOK_POLL_INTERVAL_MS: int(10, 60_000),
  ROUTER_JWT_SECRET: z.string(),
  ROUTER_JWT_PUBLIC_KEYS: z.string(),
  ROUTER_TOKEN_MAX_LIFETIME_SECONDS: int(60, 366 * 24 * 3600),
  ROUTER_DEADLINE_MS: int(1),
  ROUTER_CATALOG_FILE: z.string().min(1),
  ROUTER_UPSTREAM_BASE_URLS: z.string().refine((v) => parseUpstreamBaseUrls(v) !== null, 'must be empty or provider=http(s) URL pairs separated by commas'),
  ROUTER_BFL_API_KEY: providerKey,
  ROUTER_OPENAI_API_KEY: providerKey,
  ROUTER_STABILITY_API_KEY: providerKey,
  ROUTER_RECRAFT_API_KEY: providerKey,
  ROUTER_IDEOGRAM_API_KEY: providerKey,
  ROUTER_KLING_ACCESS_KEY: providerKey,
  ROUTER_KLING_SECRET_KEY: providerKey,
  ROUTER_LUMA_API_KEY: providerKey,
  ROUTER_RUNWAY_API_KEY: providerKey,
  ROUTER_MINIMAX_API_KEY: providerKey,
  ROUTER_GOOGLE_API_KEY: providerKey,
  ROUTER_ELEVENLABS_API_KEY: providerKey,
});

type Parsed = z.infer<typeof schema>;
export type Surface = Parsed['SURFACE'];

export interface Config {
  env: Parsed['NODE_ENV'];
  logLevel: Parsed['LOG_LEVEL'];
  databaseUrl: string;
  databasePreparedStatements: boolean;
  redisUrl: string;
  redisPrefix: string;
  api: {
    host: string;
    port: number;
    publicUrl: string;
    basePath: string;
    trustProxyHops: number;
    shutdownGraceMs: number;
    /** Browser origins allowed to call the API (CORS): `*` for any; empty for none. */
    corsOrigins: '*' | string[];
  };
  surface: Surface;
  deploymentDomain: string;
  selfHostedToken: string;
  operatorToken: string;
  /** Brute-force guard: failed authentications allowed per client address and window. */
  authFailures: { limit: number; windowSeconds: number };
  signingSecret: string;
  signedUrlTtlSeconds: number;
  maxUploadBytes: number;
  /** Resumable uploads: the largest file, and how long an unfinished one is kept. */
  resumableUploads: { maxBytes: number; expirySeconds: number };
  /** Imports by URL: the largest file and the time one may take. */
  urlImports: { maxBytes: number; timeoutSeconds: number };
  /** Outbound requests may reach loopback addresses (tests, `npm start`); never private ones. */
  outboundAllowLoopback: boolean;
  maxJsonBodyBytes: number;
  /** v1 user data: bytes of one file, bytes and files of one account. */
  userdata: { maxFileBytes: number; maxAccountBytes: number; maxFiles: number };
  /** Deadlines for receiving a request, against clients that send it slowly or never finish; the listen backlog. */
  http: { headersTimeoutMs: number; requestTimeoutMs: number; timeoutCheckMs: number; listenBacklog: number };
  /** Load shedding thresholds (0: that check is off). */
  overload: { maxEventLoopDelayMs: number; maxEventLoopUtilization: number; maxHeapUsedFraction: number; sampleIntervalMs: number; maxRequestsInFlight: number; maxAcceptQueue: number; retryAfterSeconds: number };
  /** How often readiness checks may write to the blob store. */
  readiness: { storageProbeIntervalMs: number };
  storage:
    | { driver: 'local'; dir: string }
    | {
        driver: 's3';
        endpoint: string;
        publicEndpoint: string;
        region: string;
        bucket: string;
        accessKeyId: string;
        secretAccessKey: string;
        forcePathStyle: boolean;
        /** A request whose connection stays silent this long fails (and is retried) instead of hanging. */
        requestTimeoutMs: number;
      };
  jobs: {
    retentionSeconds: number;
    queueTimeoutSeconds: number;
    executionTimeoutSeconds: number;
    creditsPerSecond: number;
    maxAttempts: number;
    captureLogs: boolean;
    sseKeepaliveMs: number;
    preferWaitMaxSeconds: number;
  };
  worker: {
    engineUrl: string;
    engineStallTimeoutMs: number;
    engineInputDir: string;
    engineOutputDir: string;
    engineModelsDir: string;
    /** The worker's model cache: where, how many bytes at most, how often deleted blobs are looked for. */
    modelCache: { dir: string; maxBytes: number; checkSeconds: number };
    workerId: string;
    host: string;
    port: number;
    shutdownGraceMs: number;
    logCaptureBytes: number;
  };
  webhooks: {
    host: string;
    port: number;
    timeoutMs: number;
    maxResponseBytes: number;
    retryScale: number;
    disableAfterSeconds: number;
    concurrency: number;
    pollIntervalMs: number;
  };
  router: {
    jwtSecret: string;
    jwtPublicKeys: string;
    tokenMaxLifetimeSeconds: number;
    deadlineMs: number;
    catalogFile: string;
    upstreamBaseUrls: Record<string, string>;
    providerKeys: ProviderKeys;
  };
}

/** The router's credentials at its partners; an empty value: not configured. */
export interface ProviderKeys {
  bfl: string;
  openai: string;
  stability: string;
  recraft: string;
  ideogram: string;
  klingAccessKey: string;
  klingSecretKey: string;
  luma: string;
  runway: string;
  minimax: string;
  google: string;
  elevenlabs: string;
}

/** `bfl=http://127.0.0.1:8190/bfl,openai=https://proxy/openai` to a map; null when malformed. */
export function parseUpstreamBaseUrls(value: string): Record<string, string> | null {
  const result: Record<string, string> = {};
  for (const pair of value.split(',').map((p) => p.trim()).filter(Boolean)) {
    const eq = pair.indexOf('=');
    const provider = pair.slice(0, eq);
    const base = pair.slice(eq + 1).replace(/\/+$/, '');
    if (eq < 1 || !/^[a-z0-9]+([._-][a-z0-9]+)*$/.test(provider) || !/^https?:\/\//.test(base) || !URL.canParse(base)) return null;
    result[provider] = base;
  }
  return result;
}

/**
 * `*`, or `https://app.example.com,http://localhost:5173` to the list of origins; empty to none;
 * null when malformed. An origin is what a browser sends in `Origin`: scheme, host and a port
 * other than the scheme's default, nothing else (no path, no trailing slash).
 */
export function parseCorsOrigins(value: string): '*' | string[] | null {
  const entries = value.split(',').map((e) => e.trim()).filter(Boolean);
  if (entries.length === 1 && entries[0] === '*') return '*';
  for (const entry of entries) {
    if (!URL.canParse(entry)) return null;
    const url = new URL(entry);
    if (!['http:', 'https:'].includes(url.protocol) || url.origin !== entry) return null;
  }
  return [...new Set(entries)];
}

export class ConfigError extends Error {}

/** Only addresses that cannot be reached from another machine: a host name such as 127.example.com is not one. */
function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  if (bare === 'localhost' || bare === '::1') return true;
  return isIPv4(bare) && bare.startsWith('127.');
}

const PLACEHOLDER = 'CHANGE-ME';
/** Secrets that guard access: a known value of one lets anyone in. */
const GUARDING_SECRETS = ['SIGNING_SECRET', 'ROUTER_JWT_SECRET', 'OPERATOR_TOKEN', 'SELF_HOSTED_TOKEN'] as const;

/** Parses and validates the environment once; a bad value names its variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, string> = {};
  for (const [name, fallback] of Object.entries(ENV_DEFAULTS)) {
    const value = env[name];
    raw[name] = value === undefined || value === '' ? fallback : value.trim();
  }
  // The self-hosted companion proxy listens on 8189 next to an engine on 8188 unless told otherwise.
  if (raw.SURFACE === 'self-hosted' && !env.API_PORT) raw.API_PORT = '8189';
  // An S3 endpoint switches the default driver to S3.
  if (!env.STORAGE_DRIVER && raw.S3_ENDPOINT) raw.STORAGE_DRIVER = 's3';

  const result = schema.safeParse(raw);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.')}: ${i.message} (got "${raw[String(i.path[0])]}")`);
    throw new ConfigError(`Invalid configuration:\n  ${problems.join('\n  ')}`);
  }
  const e = result.data;
  if (e.NODE_ENV === 'production' && e.SIGNING_SECRET === ENV_DEFAULTS.SIGNING_SECRET) {
    throw new ConfigError('Invalid configuration:\n  SIGNING_SECRET: must be set in production');
  }
  // The shipped Secret template (k8s/secret.yaml) passes every other check. Applied unedited, it
  // would let anyone who read it mint router tokens or open the queue dashboard.
  const placeholders = GUARDING_SECRETS.filter((name) => e[name].includes(PLACEHOLDER));
  if (e.NODE_ENV === 'production' && placeholders.length > 0) {
    throw new ConfigError(`Invalid configuration:\n  ${placeholders.map((name) => `${name}: still the template's ${PLACEHOLDER} placeholder; set a secret of your own`).join('\n  ')}`);
  }
  if (e.SURFACE === 'self-hosted' && !isLoopback(e.API_HOST) && !e.SELF_HOSTED_TOKEN) {
    throw new ConfigError('Invalid configuration:\n  API_HOST: the self-hosted surface binds beyond loopback only with SELF_HOSTED_TOKEN set');
  }
  if (e.STORAGE_DRIVER === 's3' && !e.S3_ENDPOINT && !e.S3_REGION) {
    throw new ConfigError('Invalid configuration:\n  S3_ENDPOINT: or S3_REGION is required for the s3 driver');
  }
  return {
    env: e.NODE_ENV,
    logLevel: e.LOG_LEVEL,
    databaseUrl: e.DATABASE_URL,
    databasePreparedStatements: e.DATABASE_PREPARED_STATEMENTS,
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    api: {
      host: e.API_HOST,
      port: e.API_PORT,
      publicUrl: e.PUBLIC_URL.replace(/\/$/, ''),
      basePath: e.BASE_PATH,
      trustProxyHops: e.TRUST_PROXY_HOPS,
      shutdownGraceMs: e.API_SHUTDOWN_GRACE_MS,
      corsOrigins: parseCorsOrigins(e.CORS_ALLOWED_ORIGINS) ?? [],
    },
    surface: e.SURFACE,
    deploymentDomain: e.DEPLOYMENT_DOMAIN,
    selfHostedToken: e.SELF_HOSTED_TOKEN,
    operatorToken: e.OPERATOR_TOKEN,
    authFailures: { limit: e.AUTH_FAILURE_LIMIT, windowSeconds: e.AUTH_FAILURE_WINDOW_SECONDS },
    signingSecret: e.SIGNING_SECRET,
    signedUrlTtlSeconds: e.SIGNED_URL_TTL_SECONDS,
    maxUploadBytes: e.MAX_UPLOAD_BYTES,
    resumableUploads: { maxBytes: e.MAX_RESUMABLE_UPLOAD_BYTES, expirySeconds: e.RESUMABLE_UPLOAD_EXPIRY_SECONDS },
    urlImports: { maxBytes: e.URL_IMPORT_MAX_BYTES, timeoutSeconds: e.URL_IMPORT_TIMEOUT_SECONDS },
    outboundAllowLoopback: e.OUTBOUND_ALLOW_LOOPBACK,
    maxJsonBodyBytes: e.MAX_JSON_BODY_BYTES,
    userdata: { maxFileBytes: e.USERDATA_MAX_FILE_BYTES, maxAccountBytes: e.USERDATA_MAX_ACCOUNT_BYTES, maxFiles: e.USERDATA_MAX_FILES },
    http: {
      // Node requires the headers deadline to fall within the whole request's.
      headersTimeoutMs: Math.min(e.HTTP_HEADERS_TIMEOUT_MS, e.HTTP_REQUEST_TIMEOUT_MS),
      requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
      timeoutCheckMs: e.HTTP_TIMEOUT_CHECK_MS,
      listenBacklog: e.HTTP_LISTEN_BACKLOG,
    },
    overload: {
      maxEventLoopDelayMs: e.OVERLOAD_MAX_EVENT_LOOP_DELAY_MS,
      maxEventLoopUtilization: e.OVERLOAD_MAX_EVENT_LOOP_UTILIZATION,
      maxHeapUsedFraction: e.OVERLOAD_MAX_HEAP_USED_FRACTION,
      sampleIntervalMs: e.OVERLOAD_SAMPLE_INTERVAL_MS,
      maxRequestsInFlight: e.OVERLOAD_MAX_REQUESTS_IN_FLIGHT,
      maxAcceptQueue: e.OVERLOAD_MAX_ACCEPT_QUEUE,
      retryAfterSeconds: e.OVERLOAD_RETRY_AFTER_SECONDS,
    },
    readiness: { storageProbeIntervalMs: e.STORAGE_WRITE_PROBE_INTERVAL_MS },
    storage:
      e.STORAGE_DRIVER === 'local'
        ? { driver: 'local', dir: e.STORAGE_DIR }
        : {
            driver: 's3',
            endpoint: e.S3_ENDPOINT,
            publicEndpoint: e.S3_PUBLIC_ENDPOINT || e.S3_ENDPOINT,
            region: e.S3_REGION,
            bucket: e.S3_BUCKET,
            accessKeyId: e.S3_ACCESS_KEY_ID,
            secretAccessKey: e.S3_SECRET_ACCESS_KEY,
            forcePathStyle: e.S3_FORCE_PATH_STYLE,
            requestTimeoutMs: e.S3_REQUEST_TIMEOUT_MS,
          },
    jobs: {
      retentionSeconds: e.JOB_RETENTION_SECONDS,
      queueTimeoutSeconds: e.JOB_QUEUE_TIMEOUT_SECONDS,
      executionTimeoutSeconds: e.JOB_EXECUTION_TIMEOUT_SECONDS,
      creditsPerSecond: e.CREDITS_PER_SECOND,
      maxAttempts: e.JOB_MAX_ATTEMPTS,
      captureLogs: e.CAPTURE_LOGS,
      sseKeepaliveMs: e.SSE_KEEPALIVE_MS,
      preferWaitMaxSeconds: e.PREFER_WAIT_MAX_SECONDS,
    },
    worker: {
      engineUrl: e.ENGINE_URL,
      engineStallTimeoutMs: e.ENGINE_STALL_TIMEOUT_MS,
      engineInputDir: e.ENGINE_INPUT_DIR,
      engineOutputDir: e.ENGINE_OUTPUT_DIR,
      engineModelsDir: e.ENGINE_MODELS_DIR,
      modelCache: { dir: e.MODEL_CACHE_DIR, maxBytes: e.MODEL_CACHE_MAX_BYTES, checkSeconds: e.MODEL_CACHE_CHECK_SECONDS },
      workerId: e.WORKER_ID,
      host: e.WORKER_HOST,
      port: e.WORKER_PORT,
      shutdownGraceMs: e.WORKER_SHUTDOWN_GRACE_MS,
      logCaptureBytes: e.LOG_CAPTURE_BYTES,
    },
    webhooks: {
      host: e.WEBHOOK_HOST,
      port: e.WEBHOOK_PORT,
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      maxResponseBytes: e.WEBHOOK_MAX_RESPONSE_BYTES,
      retryScale: e.WEBHOOK_RETRY_SCALE,
      disableAfterSeconds: e.WEBHOOK_DISABLE_AFTER_SECONDS,
      concurrency: e.WEBHOOK_CONCURRENCY,
      pollIntervalMs: e.WEBHOOK_POLL_INTERVAL_MS,
    },
    router: {
      jwtSecret: e.ROUTER_JWT_SECRET,
      jwtPublicKeys: e.ROUTER_JWT_PUBLIC_KEYS,
      tokenMaxLifetimeSeconds: e.ROUTER_TOKEN_MAX_LIFETIME_SECONDS,
      deadlineMs: e.ROUTER_DEADLINE_MS,
      catalogFile: e.ROUTER_CATALOG_FILE,
      upstreamBaseUrls: parseUpstreamBaseUrls(e.ROUTER_UPSTREAM_BASE_URLS) ?? {},
      providerKeys: {
        bfl: e.ROUTER_BFL_API_KEY,
        openai: e.ROUTER_OPENAI_API_KEY,
        stability: e.ROUTER_STABILITY_API_KEY,
        recraft: e.ROUTER_RECRAFT_API_KEY,
        ideogram: e.ROUTER_IDEOGRAM_API_KEY,
        klingAccessKey: e.ROUTER_KLING_ACCESS_KEY,
        klingSecretKey: e.ROUTER_KLING_SECRET_KEY,
        luma: e.ROUTER_LUMA_API_KEY,
        runway: e.ROUTER_RUNWAY_API_KEY,
        minimax: e.ROUTER_MINIMAX_API_KEY,
        google: e.ROUTER_GOOGLE_API_KEY,
        elevenlabs: e.ROUTER_ELEVENLABS_API_KEY,
      },
    },
  };
}
