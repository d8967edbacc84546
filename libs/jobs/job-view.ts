import type { JobView, OutputView, ProgressView } from '#libs/contracts';
import type { Asset, Blob, Job, JobOutput } from '#libs/db';
import { linkLifetimeSeconds, type BlobStore, type SignedUrl } from '#libs/storage';
import type { EndedJob } from './state.js';

// A Job as `GET /api/v2/jobs/{id}` shows it, rendered from its row and outputs. Pure but for the
// two things a caller knows and this does not: where the job's links point (the API answers with
// its request's mount prefix; the webhooks process with PUBLIC_URL, BASE_PATH and the job's
// deployment) and how an output's URL is signed (for the request's origin, or the public one).

export type JobWithOutputs = Job & { outputs: (JobOutput & { asset: Asset & { blob: Blob } })[] };

/** The asset an output link is signed for, and the name it downloads as. */
export interface SignableAsset {
  blobHash: string;
  contentType: string;
  expiresAt: Date | null;
}

export type SignAsset = (asset: SignableAsset, fileName: string) => Promise<SignedUrl>;

export interface JobViewParts {
  /** The job's own address (`self`), e.g. `/base/api/v2/jobs/{id}`; the other links hang off it. */
  self: string;
  sign: SignAsset;
  /** Whether the surface captures logs: it shows `urls.logs` only then. */
  captureLogs: boolean;
}

/** Signs output links for `origin` with the blob store, never past an asset's own expiry. */
export function assetSigner(store: BlobStore, ttlSeconds: number, origin: string): SignAsset {
  return (asset, fileName) =>
    store.signedUrl(asset.blobHash, {
      fileName,
      contentType: asset.contentType,
      expiresInSeconds: linkLifetimeSeconds(ttlSeconds, asset.expiresAt),
      origin,
    });
}

export function jobUrls(self: string, captureLogs: boolean): JobView['urls'] {
  return { self, events: `${self}/events`, cancel: `${self}/cancel`, ...(captureLogs ? { logs: `${self}/logs` } : {}) };
}

export async function renderOutput(output: JobWithOutputs['outputs'][number], sign: SignAsset): Promise<OutputView> {
  const signed = await sign(output.asset, output.name);
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

function progressOf(job: Pick<EndedJob, 'progress' | 'status' | 'workflow'>): ProgressView | null {
  if (job.progress) return job.progress as unknown as ProgressView;
  if (job.status === 'queued') return null;
  // Once a job runs it always has a snapshot, even before the engine reported anything.
  const nodes = Object.keys((job.workflow as Record<string, unknown>) ?? {}).length;
  const done = job.status === 'succeeded';
  return { value: done ? 1 : 0, nodes_done: done ? nodes : 0, nodes_total: nodes, current_node: null, current_node_class: null, step: null, steps: null, message: null };
}

/** The Job; `queuePosition` is read only while it is queued (null there means next in line). */
export async function renderJob(job: JobWithOutputs, queuePosition: number | null, parts: JobViewParts): Promise<JobView> {
  return {
    id: job.id,
    status: job.status,
    created_at: job.createdAt.toISOString(),
    started_at: job.startedAt?.toISOString() ?? null,
    completed_at: job.completedAt?.toISOString() ?? null,
    expires_at: job.expiresAt.toISOString(),
    // A job read as queued that the count no longer finds waiting has just started (or ended):
    // no job starts before it.
    queue_position: job.status === 'queued' ? (queuePosition ?? 0) : null,
    progress: progressOf(job),
    outputs: await Promise.all(job.outputs.map((o) => renderOutput(o, parts.sign))),
    error: (job.error as JobView['error']) ?? null,
    metrics: { queue_ms: job.queueMs, execution_ms: job.executionMs },
    urls: jobUrls(parts.self, parts.captureLogs),
    deadline_at: job.deadlineAt?.toISOString() ?? null,
  };
}

/** An output as the run that stored it knows it: what renderOutput shows. */
export interface EndedOutput {
  assetId: string;
  nodeId: string;
  name: string;
  type: string;
  hash: string;
  contentType: string;
  sizeBytes: number;
}

// More outputs than this and the waiting request reads the job back: the message stays small.
const MAX_ENDED_OUTPUTS = 100;

/**
 * A job that has just ended, as the run that ended it knows it (the row its ending statement
 * returned, and the outputs it recorded, in their order; their assets expire with the job), in
 * the fields renderJob shows. Published with the terminal status (JobEventLog.appendEnded) so that
 * a request waiting for it (`Prefer: wait`) answers without reading the job back. Null when the
 * run cannot give it whole (too many outputs): the request then reads it back.
 */
export function endedJobText(job: EndedJob, outputs: EndedOutput[]): string | null {
  if (outputs.length > MAX_ENDED_OUTPUTS) return null;
  return JSON.stringify({
    id: job.id,
    accountId: job.accountId,
    status: job.status,
    createdAt: job.createdAt,
    startedAt: job.startedAt,
    completedAt: job.completedAt,
    expiresAt: job.expiresAt,
    deadlineAt: job.deadlineAt,
    progress: progressOf(job),
    error: job.error,
    queueMs: job.queueMs,
    executionMs: job.executionMs,
    outputs: outputs.map((o) => [o.assetId, o.nodeId, o.name, o.type, o.hash, o.contentType, o.sizeBytes]),
  });
}

/** The job endedJobText describes, in the shape renderJob takes; null for text it did not write. */
export function jobFromEndedText(text: string): JobWithOutputs | null {
  try {
    const j = JSON.parse(text) as Record<string, unknown> & { outputs: [string, string, string, string, string, string, number][] };
    const date = (v: unknown) => (typeof v === 'string' ? new Date(v) : null);
    const expiresAt = date(j.expiresAt);
    return {
      ...j,
      createdAt: date(j.createdAt),
      startedAt: date(j.startedAt),
      completedAt: date(j.completedAt),
      expiresAt,
      deadlineAt: date(j.deadlineAt),
      outputs: j.outputs.map(([assetId, nodeId, name, type, hash, contentType, sizeBytes]) => ({
        jobId: j.id,
        assetId,
        nodeId,
        name,
        type,
        asset: { blobHash: hash, contentType, expiresAt, blob: { sizeBytes: BigInt(sizeBytes) } },
      })),
    } as unknown as JobWithOutputs;
  } catch {
    return null;
  }
}
