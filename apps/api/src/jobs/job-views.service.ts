import { Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { ApiError, type JobView, type OutputView, type ProgressView } from '#libs/contracts';
import type { Db, Job, JobOutput, Asset, Blob } from '#libs/db';
import type { BlobStore } from '#libs/storage';
import { BLOB_STORE, CONFIG, DB } from '../core/tokens.js';
import { requestOrigin } from '../http/request-origin.js';
import { linkBase } from '../surface/request-scope.js';
import { JobPipeline } from './job-pipeline.js';

export type JobWithOutputs = Job & { outputs: (JobOutput & { asset: Asset & { blob: Blob } })[] };

export const WITH_OUTPUTS = { outputs: { include: { asset: { include: { blob: true } } }, orderBy: { id: 'asc' as const } } };

/** Renders jobs and outputs as the contract shapes them, with links a client can follow as given. */
@Injectable()
export class JobViews {
  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    private readonly pipeline: JobPipeline,
  ) {}

  /** The caller's job, or 404 exactly as for a job that does not exist. */
  async find(accountId: string, jobId: string): Promise<JobWithOutputs> {
    const job = await this.db.job.findFirst({ where: { id: jobId, accountId }, include: WITH_OUTPUTS });
    if (!job) throw ApiError.notFound('job');
    return job;
  }

  async outputView(output: JobOutput & { asset: Asset & { blob: Blob } }, request: FastifyRequest): Promise<OutputView> {
    const signed = await this.store.signedUrl(output.asset.blobHash, {
      fileName: output.name,
      contentType: output.asset.contentType,
      expiresInSeconds: this.config.signedUrlTtlSeconds,
      origin: requestOrigin(request, this.config),
    });
    return {
      node_id: output.nodeId,
      name: output.name,
      type: output.type as OutputView['type'],
      content_type: output.asset.contentType,
      size_bytes: Number(output.asset.blob.sizeBytes),
      id: output.assetId,
      hash: `blake3:${output.asset.blobHash}`,
      url: signed.url,
      url_expires_at: signed.expiresAt.toISOString(),
      job_id: output.jobId,
    };
  }

  /** An `output` event's data with a freshly signed URL. */
  async outputEventView(data: Record<string, unknown>, request: FastifyRequest): Promise<Record<string, unknown>> {
    const asset = typeof data.id === 'string' ? await this.db.asset.findUnique({ where: { id: data.id } }) : null;
    if (!asset) return data;
    const signed = await this.store.signedUrl(asset.blobHash, {
      fileName: String(data.name ?? asset.filePath),
      contentType: asset.contentType,
      expiresInSeconds: this.config.signedUrlTtlSeconds,
      origin: requestOrigin(request, this.config),
    });
    return { ...data, url: signed.url, url_expires_at: signed.expiresAt.toISOString() };
  }

  urls(jobId: string, request: FastifyRequest): JobView['urls'] {
    const self = `${linkBase(request, this.config)}/api/v2/jobs/${jobId}`;
    return {
      self,
      events: `${self}/events`,
      cancel: `${self}/cancel`,
      ...(this.config.jobs.captureLogs ? { logs: `${self}/logs` } : {}),
    };
  }

  private progressOf(job: Job): ProgressView | null {
    if (job.progress) return job.progress as unknown as ProgressView;
    if (job.status === 'queued') return null;
    // Once a job runs it always has a snapshot, even before the engine reported anything.
    const nodes = Object.keys((job.workflow as Record<string, unknown>) ?? {}).length;
    const done = job.status === 'succeeded';
    return {
      value: done ? 1 : 0,
      nodes_done: done ? nodes : 0,
      nodes_total: nodes,
      current_node: null,
      current_node_class: null,
      step: null,
      steps: null,
      message: null,
    };
  }

  async render(job: JobWithOutputs, request: FastifyRequest): Promise<JobView> {
    return {
      id: job.id,
      status: job.status,
      created_at: job.createdAt.toISOString(),
      started_at: job.startedAt?.toISOString() ?? null,
      completed_at: job.completedAt?.toISOString() ?? null,
      expires_at: job.expiresAt.toISOString(),
      queue_position: job.status === 'queued' ? await this.pipeline.queuePosition(job.id, job.createdAt) : null,
      progress: this.progressOf(job),
      outputs: await Promise.all(job.outputs.map((o) => this.outputView(o, request))),
      error: (job.error as JobView['error']) ?? null,
      metrics: { queue_ms: job.queueMs, execution_ms: job.executionMs },
      urls: this.urls(job.id, request),
    };
  }
}
