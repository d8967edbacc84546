import { Inject, Injectable } from '@nestjs/common';
import type { Asset, Blob, Db, Job, JobOutput } from '#libs/db';
import type { BlobStore } from '#libs/storage';
import { BLOB_STORE, DB } from '../../core/tokens.js';
import { V1Files, withDisplayNames } from '../files/v1-files.service.js';
import { cloudEnding } from './v1-status.js';

type Output = JobOutput & { asset: Asset & { blob: Blob } };
export type JobForHistory = Job & { outputs: Output[] };

const TEXT_KEYS = new Set(['text', 'string', 'texts']);
const MAX_TEXT_BYTES = 256 * 1024;

/** A queue item as the engine shows it; extra_data carries the client id only, never credentials. */
export type QueueTuple = [number, string, unknown, Record<string, unknown>, string[]];

/** Jobs rendered in the engine's own shapes: queue tuples and history entries. */
@Injectable()
export class EngineViews {
  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    private readonly files: V1Files,
  ) {}

  async queueTuples(jobs: Job[]): Promise<QueueTuple[]> {
    const names = await this.files.displayNames(jobs.map(promptOf));
    return jobs.map((j) => this.tuple(j, names));
  }

  private tuple(job: Job, names: Map<string, string>): QueueTuple {
    return [Number(job.number), job.id, withDisplayNames(promptOf(job), names), job.clientId ? { client_id: job.clientId } : {}, job.outputNodes];
  }

  async history(jobs: JobForHistory[]): Promise<Record<string, unknown>> {
    const names = await this.files.displayNames(jobs.map(promptOf));
    const out: Record<string, unknown> = {};
    for (const job of jobs) out[job.id] = await this.entry(job, names);
    return out;
  }

  private async entry(job: JobForHistory, names: Map<string, string>): Promise<Record<string, unknown>> {
    const outputs: Record<string, Record<string, unknown[]>> = {};
    for (const o of job.outputs) {
      const node = (outputs[o.nodeId] ??= {});
      const list = (node[o.engineKey] ??= []);
      const text = await this.textOf(o);
      list.push(text ?? { filename: o.name, subfolder: job.id, type: o.engineType });
    }
    const meta: Record<string, unknown> = {};
    for (const nodeId of Object.keys(outputs)) meta[nodeId] = { node_id: nodeId, display_node: nodeId, parent_node: null, real_node_id: nodeId };
    const succeeded = job.status === 'succeeded';
    return {
      prompt: this.tuple(job, names),
      outputs,
      status: { status_str: succeeded ? 'success' : 'error', completed: succeeded, messages: this.messages(job) },
      meta,
    };
  }

  /** Text outputs were stored as small files; the engine's history shows the strings themselves. */
  private async textOf(o: Output): Promise<string | null> {
    if (!TEXT_KEYS.has(o.engineKey) || o.type !== 'text' || !/_\d+\.txt$/.test(o.name) || !o.name.startsWith(`${o.nodeId}_`)) return null;
    if (Number(o.asset.blob.sizeBytes) > MAX_TEXT_BYTES) return null;
    try {
      const parts: Buffer[] = [];
      for await (const c of await this.store.read(o.asset.blobHash)) parts.push(Buffer.from(c as Buffer));
      return Buffer.concat(parts).toString('utf8');
    } catch {
      return null;
    }
  }

  /**
   * The engine's status messages: those the v1 socket was sent of the run, as the worker stored
   * them, then the ending the service sent for a job the engine did not end (the same message,
   * timestamp included, as the socket got: cloudEnding). Jobs from before the messages were
   * stored get theirs rebuilt from the job's times.
   */
  private messages(job: Job): Array<[string, Record<string, unknown>]> {
    const stored = Array.isArray(job.engineMessages) ? (job.engineMessages as Array<[string, Record<string, unknown>]>) : null;
    const list = stored ? [...stored] : this.rebuiltStart(job);
    if (list.some(([type]) => ENDINGS.has(type))) return list;
    const ending = cloudEnding(job, list.some(([type]) => type === 'execution_start'));
    if (ending) list.push(ending);
    else if (job.status === 'succeeded') list.push(['execution_success', { prompt_id: job.id, timestamp: (job.completedAt ?? job.updatedAt).getTime() }]);
    return list;
  }

  private rebuiltStart(job: Job): Array<[string, Record<string, unknown>]> {
    const started = job.startedAt?.getTime();
    if (started === undefined) return [];
    return [
      ['execution_start', { prompt_id: job.id, timestamp: started }],
      ['execution_cached', { nodes: [], prompt_id: job.id, timestamp: started }],
    ];
  }
}

const ENDINGS = new Set(['execution_success', 'execution_error', 'execution_interrupted']);

/**
 * The prompt as the client sent it (file names and nodes that failed validation included); jobs
 * from before it was kept show the workflow they ran, their asset references by name.
 */
function promptOf(job: Job): unknown {
  return job.submittedWorkflow ?? job.workflow;
}
