// The console's only way to the service: small typed calls over the public routes (v2, and the
// router's /v1/models), all on the page's own origin. A client generated from /openapi.json can
// replace this module; the pages use nothing else of it than what is exported here.

import { createParser } from 'eventsource-parser';

export type JobStatus = 'queued' | 'running' | 'succeeded' | 'canceling' | 'canceled' | 'failed' | 'expired';
export const JOB_STATUSES: JobStatus[] = ['queued', 'running', 'succeeded', 'canceling', 'canceled', 'failed', 'expired'];
const TERMINAL: JobStatus[] = ['succeeded', 'canceled', 'failed', 'expired'];
export const isTerminal = (s: JobStatus) => TERMINAL.includes(s);

export interface Progress {
  value: number;
  nodes_done: number;
  nodes_total: number;
  current_node?: string | null;
  current_node_class?: string | null;
  step?: number | null;
  steps?: number | null;
  message?: string | null;
}

export interface Output {
  id: string;
  node_id: string;
  name: string;
  type: 'image' | 'video' | 'audio' | 'text' | 'file' | 'latent';
  content_type: string;
  size_bytes: number;
  hash: string | null;
  url: string;
  url_expires_at: string;
  job_id?: string | null;
}

export interface Job {
  id: string;
  status: JobStatus;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  expires_at: string;
  queue_position: number | null;
  progress: Progress | null;
  outputs: Output[];
  error: { code: string; message: string; node_id?: string | null; class_type?: string | null; traceback?: string | null } | null;
  metrics?: Record<string, number | null>;
  urls: { self: string; events: string; cancel: string; logs?: string };
}

export interface Asset {
  id: string;
  hash: string;
  size_bytes: number;
  content_type: string;
  file_path: string;
  tags: string[];
  created_new: boolean;
  created_at: string;
  url: string;
  url_expires_at: string;
  expires_at: string | null;
  job_id: string | null;
}

export interface Page<T> {
  data: T[];
  has_more: boolean;
  next_cursor?: string;
  limit: number;
}

export interface LedgerEntry {
  id: string;
  amount: number;
  reason: string;
  ref: string | null;
  created_at: string;
}

export interface Account {
  id: string;
  name: string;
  tier: string;
  status: string;
  credit_balance: number;
  limits: { max_concurrent_jobs: number; max_queued_jobs: number; requests_per_minute: number; max_event_streams: number };
  usage: { running_jobs: number; queued_jobs: number; open_event_streams: number; requests_this_minute: number };
  router: { enabled: boolean; max_concurrent_calls: number; spend_cap_cents: number; window_calls: number; window_seconds: number };
  charges: Page<LedgerEntry>;
}

export interface RouterModel {
  id: string;
  provider: string;
  model: string;
  billing: { charges_on_policy_rejection: string };
  input_schema_url?: string;
}

/** A router call's answer, whatever it was: the body as the partner or the router sent it. */
export interface RouterResult {
  ok: boolean;
  status: number;
  contentType: string;
  body: Blob;
  /** `X-Service-Error-Type` on failures. */
  bucket: string | null;
  requestId: string | null;
}

export type NodeErrors = Record<string, { field: string; reason: string }[]>;

/** Any answer that is not a success: the v2 ErrorEnvelope or the router's `{detail, error_type}`, read into one shape. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> | null = null,
    readonly retryAfter: number | null = null,
  ) {
    super(message);
  }

  get nodeErrors(): NodeErrors | null {
    const found = this.details?.node_errors;
    return found && typeof found === 'object' ? (found as NodeErrors) : null;
  }
}

// --- where the API is, and the key ----------------------------------------------------------

/**
 * The page is served at `<prefix>/console/`; the API is everything before that (BASE_PATH, a
 * deployment's `/deployment/{id}`), on the same origin.
 */
export function apiBase(pathname = location.pathname): string {
  const at = pathname.lastIndexOf('/console/');
  return at >= 0 ? pathname.slice(0, at) : pathname.replace(/\/console$/, '');
}

const KEY = 'comfy-cloud.api-key';

/** The API key lives in this tab's sessionStorage only: never a cookie, never localStorage. */
export const session = {
  /** null: not signed in; '' signed in without a key (a self-hosted server with no token). */
  key: (): string | null => sessionStorage.getItem(KEY),
  signIn: (key: string) => sessionStorage.setItem(KEY, key),
  signOut: () => sessionStorage.removeItem(KEY),
};

/** Called when the service refuses the stored key: the app signs out and says why. */
let onUnauthorized: () => void = () => undefined;
export function whenUnauthorized(handler: () => void): void {
  onUnauthorized = handler;
}

function authHeaders(key = session.key()): Record<string, string> {
  return key ? { authorization: `Bearer ${key}` } : {};
}

function retryAfterOf(res: Response): number | null {
  const v = res.headers.get('retry-after');
  return v && /^\d+$/.test(v) ? Number(v) : null;
}

async function failureOf(res: Response): Promise<ApiFailure> {
  const text = await res.text().catch(() => '');
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  const envelope = (body as { error?: { code?: string; message?: string; details?: Record<string, unknown> | null } } | null)?.error;
  if (envelope?.code) return new ApiFailure(res.status, envelope.code, envelope.message ?? res.statusText, envelope.details ?? null, retryAfterOf(res));
  const router = body as { detail?: unknown; error_type?: string } | null;
  if (router?.error_type) return new ApiFailure(res.status, router.error_type, String(router.detail ?? ''), null, retryAfterOf(res));
  return new ApiFailure(res.status, `http_${res.status}`, text.slice(0, 300) || res.statusText, null, retryAfterOf(res));
}

/** A path of the API (`/api/v2/...`) or a link it returned (already carrying its prefix). */
function resolve(pathOrLink: string): string {
  return pathOrLink.startsWith('/api/') || pathOrLink.startsWith('/v1/') ? `${apiBase()}${pathOrLink}` : pathOrLink;
}

async function send(pathOrLink: string, init: RequestInit = {}, key?: string | null): Promise<Response> {
  const res = await fetch(resolve(pathOrLink), { ...init, headers: { ...authHeaders(key), ...(init.headers as Record<string, string>) }, credentials: 'omit' });
  if (res.status === 401 && key === undefined) onUnauthorized();
  return res;
}

async function json<T>(pathOrLink: string, init: RequestInit = {}, key?: string | null): Promise<T> {
  const res = await send(pathOrLink, init, key);
  if (!res.ok) throw await failureOf(res);
  return (await res.json()) as T;
}

const query = (params: Record<string, string | number | undefined | null>) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
};

const jsonBody = (body: unknown, extra: Record<string, string> = {}): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...extra },
  body: JSON.stringify(body),
});

// --- the calls --------------------------------------------------------------------------------

/** Whether the service takes this key (an empty one on a self-hosted server without a token). */
export async function checkKey(key: string): Promise<Account> {
  return json<Account>('/api/v2/account?limit=1', {}, key);
}

export const jobs = {
  list: (p: { status?: string; cursor?: string; limit?: number } = {}) => json<Page<Job>>(`/api/v2/jobs${query(p)}`),
  get: (id: string) => json<Job>(`/api/v2/jobs/${encodeURIComponent(id)}`),
  submit: (workflow: Record<string, unknown>) => json<Job>('/api/v2/jobs', jsonBody({ workflow }, { 'idempotency-key': crypto.randomUUID() })),
  cancel: (job: Job) => json<Job>(job.urls.cancel, { method: 'POST' }),
  workflow: (job: Job) => json<{ workflow: Record<string, unknown>; format: string }>(`${job.urls.self}/workflow`),
  /** null when nothing was captured (204). */
  async log(job: Job): Promise<{ text: string; truncated: boolean } | null> {
    if (!job.urls.logs) return null;
    const res = await send(job.urls.logs);
    if (res.status === 204) return null;
    if (!res.ok) throw await failureOf(res);
    return (await res.json()) as { text: string; truncated: boolean };
  },
  /**
   * Follows `urls.events` (SSE read with fetch, which can send the key, unlike EventSource) until
   * the stream ends or `signal` aborts; resumes after `lastEventId`. Returns the last id seen.
   */
  async events(job: Job, onEvent: (name: string, data: unknown) => void, signal: AbortSignal, lastEventId?: string): Promise<string | undefined> {
    const res = await send(job.urls.events, { headers: { accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) }, signal });
    if (!res.ok || !res.body) throw await failureOf(res);
    let last = lastEventId;
    const parser = createParser({
      onEvent(e) {
        if (e.id) last = e.id;
        try {
          onEvent(e.event ?? 'message', JSON.parse(e.data));
        } catch {
          // a frame that is not JSON carries nothing the page shows
        }
      },
    });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return last;
      parser.feed(value);
    }
  },
};

export const assets = {
  list: (p: { kind?: 'upload' | 'output'; cursor?: string; limit?: number } = {}) => json<Page<Asset>>(`/api/v2/assets${query(p)}`),
  /** Whether the service already holds these bytes for this account (`blake3:<hex>`). */
  async has(hash: string): Promise<boolean> {
    const res = await send(`/api/v2/assets/by-hash/${encodeURIComponent(hash)}`, { method: 'HEAD' });
    if (res.status === 200) return true;
    if (res.status === 404) return false;
    throw await failureOf(res);
  },
  fromHash: (hash: string, filePath: string) => json<Asset>('/api/v2/assets/from-hash', jsonBody({ hash, file_path: filePath })),
  upload(file: File, hash: string): Promise<Asset> {
    const form = new FormData();
    form.append('file_path', file.name);
    form.append('expected_hash', hash);
    form.append('file', file, file.name);
    return json<Asset>('/api/v2/assets', { method: 'POST', body: form, headers: { 'idempotency-key': crypto.randomUUID() } });
  },
};

export const account = {
  get: (p: { cursor?: string; limit?: number } = {}) => json<Account>(`/api/v2/account${query(p)}`),
};

/** Router model ids are `provider/model`: each segment is encoded on its own. */
const modelPath = (id: string) => `/v1/models/${id.split('/').map(encodeURIComponent).join('/')}`;

export const router = {
  list: (cursor?: string) => json<Page<RouterModel>>(`/v1/models${query({ cursor, limit: 100 })}`),
  get: (id: string) => json<RouterModel>(modelPath(id)),
  schema: (id: string) => json<Record<string, unknown>>(`${modelPath(id)}/openapi.json`),
  async call(id: string, input: unknown): Promise<RouterResult> {
    const res = await send(modelPath(id), jsonBody(input, { 'idempotency-key': crypto.randomUUID() }));
    return {
      ok: res.ok,
      status: res.status,
      contentType: res.headers.get('content-type') ?? 'application/octet-stream',
      body: await res.blob(),
      bucket: res.headers.get('x-service-error-type'),
      requestId: res.headers.get('x-service-request-id'),
    };
  },
};

/** An output's or asset's signed URL is fetched without the key (the signature is the credential). */
export async function fetchText(url: string, maxBytes = 256 * 1024): Promise<string> {
  const res = await fetch(url, { credentials: 'omit' });
  if (!res.ok) throw new ApiFailure(res.status, `http_${res.status}`, res.statusText);
  const text = await res.text();
  return text.length > maxBytes ? `${text.slice(0, maxBytes)}\n…` : text;
}
