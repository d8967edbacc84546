import { createWriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import { getAsset, openDownload, uploadAsset, type Download, type UploadOptions, type UploadResult } from './assets.js';
import { Transport, type ComfyCloudOptions } from './client.js';
import { followJob, getJob, pollJob, submitJob, type FollowOptions, type SubmitOptions } from './jobs.js';
import { callModel, type ModelCallOptions, type ModelCallResult } from './router.js';
import type { Asset, Job, Output, SubmitJobRequest } from './types.js';

export { blake3Of } from './assets.js';
export { unwrap } from './client.js';
export { ComfyCloudError } from './errors.js';
export { verifyWebhook, type WebhookHeaders } from './webhooks.js';
export { TERMINAL_STATUSES } from './types.js';
export type * from './types.js';
export type { ComfyCloudOptions, Download, FollowOptions, ModelCallOptions, ModelCallResult, SubmitOptions, UploadOptions, UploadResult };

/**
 * The comfy-cloud client. `api` is the client generated from the OpenAPI document: every
 * operation, typed by its path (`api.GET('/api/v2/jobs/{id}', {params: {path: {id}}})`). The
 * methods are what a generator does not write: keyed submission that survives a lost answer,
 * following a job to its end, deduplicated uploads, downloads, router calls that outlast the
 * router's deadline.
 */
export class ComfyCloud {
  private readonly transport: Transport;

  constructor(options: ComfyCloudOptions) {
    this.transport = new Transport(options);
  }

  get api() {
    return this.transport.api;
  }

  /** `POST /api/v2/jobs`, retried safely under one `Idempotency-Key`. */
  submit(body: SubmitJobRequest, options?: SubmitOptions): Promise<Job> {
    return submitJob(this.transport, body, options);
  }

  job(id: string, signal?: AbortSignal): Promise<Job> {
    return getJob(this.transport, id, signal);
  }

  /** Waits for the job to end (event stream, resumed after drops; polling as the fallback). */
  follow(id: string, options?: FollowOptions): Promise<Job> {
    return followJob(this.transport, id, options);
  }

  /** Waits for the job to end by polling only. */
  poll(id: string, intervalMs = 1_000, signal?: AbortSignal): Promise<Job> {
    return pollJob(this.transport, id, intervalMs, signal);
  }

  /** Submits and follows: the job as it ended. */
  async run(body: SubmitJobRequest, options: SubmitOptions & FollowOptions = {}): Promise<Job> {
    const job = await this.submit(body, options);
    return job.status === 'queued' || job.status === 'running' || job.status === 'canceling' ? this.follow(job.id, options) : job;
  }

  /** Uploads bytes, or records them from a blob already stored with the same blake3 hash. */
  upload(data: Blob | Uint8Array, options: UploadOptions): Promise<UploadResult> {
    return uploadAsset(this.transport, data, options);
  }

  asset(id: string, signal?: AbortSignal): Promise<Asset> {
    return getAsset(this.transport, id, signal);
  }

  /** An output's or asset's bytes, streamed from its signed URL. */
  download(target: Output | Asset | string, signal?: AbortSignal): Promise<Download> {
    return openDownload(this.transport, target, signal);
  }

  /** Streams an output or asset into a file; resolves with the bytes written. */
  async downloadTo(target: Output | Asset | string, file: string, signal?: AbortSignal): Promise<number> {
    const { body } = await this.download(target, signal);
    const out = createWriteStream(file);
    await pipeline(Readable.fromWeb(body as NodeReadableStream<Uint8Array>), out, { signal });
    return out.bytesWritten;
  }

  /** `POST /v1/models/{provider}/{model}`, retried under one key after `deadline_exceeded`. */
  callModel<T = unknown>(model: string, input: unknown, options?: ModelCallOptions): Promise<ModelCallResult<T>> {
    return callModel<T>(this.transport, model, input, options);
  }
}
