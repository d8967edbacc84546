import { EventSourceParserStream } from 'eventsource-parser/stream';
import { unwrap, type Transport } from './client.js';
import { ComfyCloudError, errorOf } from './errors.js';
import { createOnce, type RetryOptions } from './idempotent.js';
import { backoffMs, isNetworkError, sleep } from './retry.js';
import { TERMINAL_STATUSES, type Job, type JobEvent, type SubmitJobRequest } from './types.js';

export interface SubmitOptions extends RetryOptions {
  /** Makes the submission safe to retry; a fresh UUID when omitted. */
  idempotencyKey?: string;
  /** `Prefer: wait=<seconds>`: hold the answer until the job ends (at most 30 s). */
  waitSeconds?: number;
  /** `Cancel-After`: a deadline such as `90s`, `5m` or seconds. */
  cancelAfter?: string | number;
}

/**
 * Submits a job once, however many times the request has to be sent (see createOnce): a lost
 * answer is recovered from `422 idempotency_key_reuse` and its `error.details.job_id`.
 */
export function submitJob(t: Transport, body: SubmitJobRequest, options: SubmitOptions = {}): Promise<Job> {
  const headers: Record<string, string> = { 'idempotency-key': options.idempotencyKey ?? crypto.randomUUID() };
  if (options.waitSeconds !== undefined) headers.prefer = `wait=${options.waitSeconds}`;
  if (options.cancelAfter !== undefined) headers['cancel-after'] = String(options.cancelAfter);
  const send = async () => unwrap(await t.api.POST('/api/v2/jobs', { body, headers, signal: options.signal }));
  return createOnce(send, 'job_id', (id) => getJob(t, id, options.signal), options);
}

export async function getJob(t: Transport, id: string, signal?: AbortSignal): Promise<Job> {
  return unwrap(await t.api.GET('/api/v2/jobs/{id}', { params: { path: { id } }, signal }));
}

export interface FollowOptions {
  /** Called for every event as it arrives (snapshots sent again after a resume included). */
  onEvent?: (event: JobEvent) => void;
  signal?: AbortSignal;
  /** Polling interval once the stream is given up (default 1 s). */
  pollIntervalMs?: number;
  /** Stream connections in a row that may end or fail without any event, before polling (default 3). */
  maxReconnects?: number;
}

/**
 * Follows a job until it ends and returns it as `GET` answers it then (with its outputs' signed
 * URLs). Reads the event stream; a stream that drops before the final status is resumed with the
 * last `id` seen as `Last-Event-ID`, so nothing is missed or repeated. When the stream cannot be had
 * (too many streams open, a proxy that buffers, repeated failures) it polls instead: polling is
 * the source of truth.
 */
export async function followJob(t: Transport, id: string, options: FollowOptions = {}): Promise<Job> {
  const { signal } = options;
  let lastEventId: string | undefined;
  let idle = 0;
  while (idle < (options.maxReconnects ?? 3)) {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (lastEventId) headers['last-event-id'] = lastEventId;
    let response: Response;
    try {
      response = await t.fetch(t.request(`/api/v2/jobs/${encodeURIComponent(id)}/events`, { headers, signal }));
    } catch (error) {
      if (signal?.aborted || !isNetworkError(error)) throw error;
      idle++;
      await sleep(backoffMs(idle), signal);
      continue;
    }
    if (!response.ok || !response.body) {
      const error = await errorOf(response);
      // The job's own answer (missing, not yours, bad credential) will not change by polling.
      if ([400, 401, 403, 404].includes(response.status)) throw error;
      break;
    }
    let events = 0;
    let ended = false;
    try {
      const frames = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
      for await (const frame of frames as unknown as AsyncIterable<{ id?: string; event?: string; data: string }>) {
        events++;
        if (frame.id) lastEventId = frame.id;
        const event: JobEvent = { id: frame.id, event: frame.event ?? 'message', data: parseData(frame.data) };
        options.onEvent?.(event);
        if (event.event === 'status' && TERMINAL_STATUSES.has((event.data as { status?: string })?.status ?? '')) ended = true;
      }
    } catch (error) {
      if (signal?.aborted) throw error;
      // A dropped connection: resumed below from lastEventId.
    }
    if (ended) return getJob(t, id, signal);
    idle = events > 0 ? 0 : idle + 1;
    if (idle > 0) await sleep(backoffMs(idle), signal);
  }
  return pollJob(t, id, options.pollIntervalMs ?? 1_000, signal);
}

/** Polls `GET /api/v2/jobs/{id}` until the job ends; a lost answer is asked again. */
export async function pollJob(t: Transport, id: string, intervalMs: number, signal?: AbortSignal): Promise<Job> {
  for (;;) {
    try {
      const job = await getJob(t, id, signal);
      if (TERMINAL_STATUSES.has(job.status)) return job;
    } catch (error) {
      if (signal?.aborted || !(isNetworkError(error) || (error instanceof ComfyCloudError && (error.status >= 500 || error.status === 429)))) throw error;
    }
    await sleep(intervalMs, signal);
  }
}

function parseData(data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    return data;
  }
}
