import type { Config } from '#libs/config';
import { assetSigner, renderJob, renderOutput, type JobStore } from '#libs/jobs';
import type { BlobStore } from '#libs/storage';
import { TEST_EVENT } from '#libs/webhooks';
import type { ClaimedDelivery } from './delivery-store.js';

// The body of a delivery: `{type, timestamp, data}`, where `data` is the Job as GET answers it,
// rendered now, at each attempt (its output URLs freshly signed, so a retry hours later still
// carries links that work; its status as it stands, which the event type need not match: a
// retried `job.running` may show the job finished since). `timestamp` is when the event happened.
// A `job.output` event adds the output it is about as `output`.

export class Payloads {
  private readonly origin: string;
  private readonly prefix: string;

  constructor(
    private readonly jobs: JobStore,
    private readonly store: BlobStore,
    private readonly config: Config,
  ) {
    // Links are absolute when PUBLIC_URL says where the API is; signed URLs of the local store
    // need an origin in any case, and fall back to where the API listens.
    this.prefix = `${config.api.publicUrl}${config.api.basePath}`;
    this.origin = config.api.publicUrl || `http://${config.api.host}:${config.api.port}`;
  }

  /** The body to send, or null when its job is gone (deleted by retention since). */
  async body(delivery: ClaimedDelivery): Promise<string | null> {
    const head = { type: delivery.eventType, timestamp: delivery.createdAt.toISOString() };
    if (delivery.eventType === TEST_EVENT || delivery.jobId === null) {
      return JSON.stringify({ ...head, data: { endpoint_id: delivery.endpointId, message: 'A test event: this endpoint receives the account\'s webhooks.' } });
    }
    const job = await this.jobs.withOutputs(delivery.jobId);
    if (!job) return null;
    const position = job.status === 'queued' ? ((await this.jobs.queuePositionsOf([job.id])).get(job.id) ?? null) : null;
    const sign = assetSigner(this.store, this.config.signedUrlTtlSeconds, this.origin);
    // A deployment's jobs are reached under its prefix, as the API's own links say.
    const self = `${this.prefix}${job.deploymentId ? `/deployment/${job.deploymentId}` : ''}/api/v2/jobs/${job.id}`;
    const data = await renderJob(job, position, { self, sign, captureLogs: this.config.jobs.captureLogs });
    if (delivery.eventType !== 'job.output') return JSON.stringify({ ...head, data });
    const output = job.outputs.find((o) => o.assetId === delivery.assetId);
    return JSON.stringify({ ...head, data, output: output ? await renderOutput(output, sign) : null });
  }
}
