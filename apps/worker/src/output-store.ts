import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { discardUnrecordedBytes, lockedBlobRow } from '#libs/assets';
import { executeStatement, Prisma, type Db } from '#libs/db';
import type { EngineClient } from '#libs/engine-protocol';
import { leaseHeld, leaseToken, type EndedOutput, type JobEventLog, type RunLease } from '#libs/jobs';
import { outputBytesObserved } from '#libs/metrics';
import { outputEventsCte } from '#libs/webhooks';
import type { BlobStore, StoredBlob } from '#libs/storage';
import { contentTypeFor, outputName, outputType, type ReportedOutput } from './output-kinds.js';
import type { Log } from '#libs/logging';

export interface StoredOutput {
  assetId: string;
  nodeId: string;
  name: string;
  type: string;
  /** Where v1 clients find it through /api/view. */
  v1Ref: { filename: string; subfolder: string; type: string };
  /** The output as this run recorded it; null when an earlier attempt of the job had. */
  recorded: EndedOutput | null;
}

// With the backoff below, a store that is away for up to about ten seconds costs no output.
const ATTEMPTS = 6;
// A new output is almost never stored already: written without asking first, one request fewer
// to S3 on the job's path. (A large one, a file, is hashed first and looked up: see putFile.)
const NEW_BYTES = { skipLookup: true } as const;

/** What an output's bytes pass through on their way to the store: the tenant's view of them. */
export interface OutputBytesView {
  /** The output as it streams (a large one); the same stream when nothing changes it. */
  stream(name: string, bytes: Readable): Readable;
  /** The output whole in memory (a small one); the same buffer when nothing changes it. */
  whole(name: string, bytes: Buffer): Buffer;
}

const UNCHANGED: OutputBytesView = { stream: (_name, bytes) => bytes, whole: (_name, bytes) => bytes };

export class OutputStoreError extends Error {}

/** The run no longer holds its job: what it made is not the job's. */
export class LeaseLostError extends Error {}

/**
 * Streams each output from the engine into the blob store (hashed on the way, stored once),
 * records it as an asset of the job, and announces it. Storage failures are retried with a fresh
 * stream from the engine; a blob is only referenced once it was stored whole.
 */
export class OutputStore {
  constructor(
    private readonly db: Db,
    private readonly store: BlobStore,
    private readonly engine: EngineClient,
    private readonly events: JobEventLog,
    private readonly log: Log,
    /** The run storing them: an output is recorded only while the run still holds its job. */
    private readonly lease: RunLease,
    private readonly view: OutputBytesView = UNCHANGED,
  ) {}

  async save(job: { id: string; accountId: string; expiresAt: Date; attempts: number }, nodeId: string, output: ReportedOutput): Promise<StoredOutput> {
    const name = outputName(nodeId, output);
    const began = performance.now();
    // Only a job run again can already have this output (stored by the earlier attempt).
    const existing =
      job.attempts > 1
        ? await this.db.jobOutput.findUnique({ where: { jobId_nodeId_engineKey_name: { jobId: job.id, nodeId, engineKey: output.key, name } } })
        : null;
    const engineType = output.kind === 'file' ? output.ref.type : 'output';
    const v1Ref = { filename: name, subfolder: job.id, type: engineType };
    if (existing) return { assetId: existing.assetId, nodeId, name, type: existing.type, v1Ref, recorded: null };

    let reportedType: string | null = null;
    const putBytes = async (): Promise<StoredBlob> => {
      let lastError: unknown = null;
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        try {
          if (output.kind === 'text') {
            reportedType = 'text/plain; charset=utf-8';
            return await this.store.putBytes(Buffer.from(output.text, 'utf8'), NEW_BYTES);
          }
          if (output.kind === 'bytes') {
            reportedType = output.contentType;
            return await this.store.putBytes(output.data, NEW_BYTES);
          }
          const view = await this.engine.viewWithInfo(output.ref);
          reportedType = view.contentType;
          try {
            // A small output read whole from the engine's folder goes to the store from memory.
            if (view.bytes) return await this.store.putBytes(this.view.whole(name, view.bytes), NEW_BYTES);
            const bytes = this.view.stream(name, view.stream);
            // Bytes stored as the engine wrote them, from a file this machine sees: the store copies the file.
            if (bytes === view.stream && view.file) return await this.store.putFile(view.file);
            return await this.store.put(bytes);
          } finally {
            // A store that failed before reading it all must not leave the engine's connection open.
            if (!view.stream.readableEnded) view.stream.destroy();
          }
        } catch (err) {
          lastError = err;
          if (attempt < ATTEMPTS) await new Promise((r) => setTimeout(r, Math.min(4_000, 250 * 2 ** attempt)));
        }
      }
      throw new OutputStoreError(`Could not store output ${name}: ${(lastError as Error)?.message ?? 'unknown error'}`);
    };
    const stored = await putBytes();
    // Only bytes written count: a deduplicated copy adds nothing to storage. (A small output goes
    // to S3 without a lookup, so there it counts even when the same bytes were stored already.)
    if (stored.created) outputBytesObserved(stored.sizeBytes);

    const contentType = output.kind === 'text' ? 'text/plain; charset=utf-8' : output.kind === 'bytes' ? output.contentType : contentTypeFor(name, reportedType);
    const type = outputType(output.key, name, contentType);
    // Blob, asset and job output in one statement and one round trip: all three exist, or none
    // does. Under the blob's lock (its first step): a deletion of the same bytes' last record then
    // cannot fail on this reference.
    const assetId = randomUUID();
    // A job's outputs never change once it has ended, nor after another worker took it over: the
    // records are written only while this run's claim still holds the job.
    const recorded = await executeStatement(this.db, Prisma.sql`
      WITH ${lockedBlobRow(stored, job.accountId)}, held AS (${leaseHeld(job.id, this.lease)}), asset AS (
        INSERT INTO assets (id, account_id, blob_hash, file_path, content_type, job_id, expires_at, created_new)
        SELECT ${assetId}::uuid, ${job.accountId}::uuid, ${stored.hash}, ${name}, ${contentType}, ${job.id}::uuid, ${job.expiresAt}, lock.new_to_account
        FROM lock, held
        RETURNING id
      ), ${outputEventsCte(Prisma.sql`asset`, job.accountId, job.id)}
      INSERT INTO job_outputs (job_id, asset_id, node_id, type, engine_key, engine_type, name)
      SELECT ${job.id}::uuid, id, ${nodeId}, ${type}, ${output.key}, ${engineType}, ${name} FROM asset`);
    if (recorded === 0) {
      // Bytes this run stored and nobody records are removed again (those of others stay).
      if (stored.created) await discardUnrecordedBytes(this.db, this.store, stored.hash).catch(() => undefined);
      throw new LeaseLostError(`Output ${name} not recorded: the job is no longer this run's.`);
    }
    // The same bytes, stored by another job or upload, may have been deleted by retention between
    // the write and the record above; the engine still has them, so they are written again. The
    // record took the blob lock, and bytes are deleted only under it (with the blob row, or when no
    // row names them): any deletion begun before the record had ended when it took the lock, and
    // none begins after it, so a look at the store is enough. (blobSurvived waits on the lock
    // once more, a round trip this path does without.)
    if (!(await this.store.has(stored.hash))) await putBytes();
    const asset = { id: assetId };
    // The output path's own time: fetch, hash, store, records. Outputs are stored in the engine's
    // order, so this starts when the engine reports the output (its `executed`) unless an earlier
    // one is still being stored (bench/output-latency.mjs reads it for a job of one output).
    this.log('info', 'output stored', { asset_id: assetId, size_bytes: stored.sizeBytes, store_ms: Math.round(performance.now() - began) });
    // Announced without waiting: the job's later events leave on the same connection, after this
    // one. The output is recorded either way; a lost announcement only costs the event.
    void this.events.append(job.id, job.accountId, 'output', {
      id: asset.id,
      node_id: nodeId,
      name,
      type,
      content_type: contentType,
      size_bytes: stored.sizeBytes,
      hash: `blake3:${stored.hash}`,
      job_id: job.id,
    }, leaseToken(this.lease)).catch((err: Error) => this.log('warn', 'output event not recorded', { err: err.message, asset_id: assetId }));
    return { assetId: asset.id, nodeId, name, type, v1Ref, recorded: { assetId: asset.id, nodeId, name, type, hash: stored.hash, contentType, sizeBytes: stored.sizeBytes } };
  }
}
