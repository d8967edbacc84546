import { randomUUID } from 'node:crypto';
import { queueWaitObserved } from '#libs/metrics';
import { JobRun, STORING_ALLOWANCE_SECONDS, type Ending } from './job-run.js';
import type { RunnerDeps } from './runner-deps.js';

export type { RunnerDeps };

/**
 * Takes the jobs the run queue hands this worker, one at a time: claims each (the claim gives the
 * run its lease) and drives its run (JobRun) from staging to its recorded ending or hand-back.
 */
export class JobRunner {
  private current: JobRun | null = null;
  /** What the runner is doing now; reported with the worker's state so a stuck step shows. */
  private claiming = false;
  /** The job this worker holds, from its claim until its ending is written; the sweeper trusts this. */
  private holding: string | null = null;
  /**
   * Whether the engine prints a closing line for its prompts. One that does not (its logs are not
   * sent) would cost every job the whole wait: after one wait in vain the runner waits no more,
   * until a job's log shows the line again.
   */
  private readonly closingLine = { printed: true };
  /**
   * The last run was handed back for want of the engine (it refused the inputs or the prompt, or
   * went away mid-run): the worker stops taking jobs until the engine answers, rather than using
   * up the attempts of every queued job in the seconds an engine takes to restart.
   */
  lostEngine = false;

  constructor(private readonly d: RunnerDeps) {}

  get currentJobId(): string | null {
    return this.holding;
  }

  get stage(): string {
    if (this.claiming) return 'claiming';
    return this.current && this.current.stage !== 'done' ? this.current.stage : 'idle';
  }

  /** Asked to stop (SIGTERM): the running job gets the grace period, then is handed back. */
  shutdown(): void {
    this.current?.shutdown();
  }

  cancel(jobId: string, reason: 'cancel' | 'expired' = 'cancel'): void {
    if (this.current?.jobId === jobId) this.current.cancel(reason);
  }

  async run(jobId: string): Promise<void> {
    this.claiming = true;
    this.lostEngine = false;
    // The engine prompt id is chosen now so the claim records it in the same statement.
    const promptId = randomUUID();
    this.holding = jobId;
    try {
      await this.claimAndRun(jobId, promptId);
    } finally {
      this.claiming = false;
      this.current = null;
      this.holding = null;
    }
  }

  private async claimAndRun(jobId: string, promptId: string): Promise<void> {
    const { jobs, config, workerId } = this.d;
    // The sealed extra_data is read while the claim commits; a failure to read it counts where it
    // is awaited, in the run, like any failure of the run.
    const extra = this.d.vault.get(jobId);
    extra.catch(() => undefined);
    const claimed = await jobs.claim(jobId, { workerId, enginePromptId: promptId, executionTimeoutSeconds: config.jobs.executionTimeoutSeconds });
    if (!claimed) return; // canceled or expired while waiting, or past its queue deadline (the sweeper expires it)
    const { job } = claimed;
    const run = new JobRun(this.d, job, promptId, extra, this.closingLine);
    this.current = run;
    this.claiming = false;
    // Waiting is measured once, on the first start; a handed-back job keeps its original wait.
    if (claimed.firstStart && job.queueMs !== null) queueWaitObserved(job.queueMs / 1000);
    this.d.log.child({ job_id: jobId })('info', 'job started', { queue_ms: job.queueMs, attempt: job.attempts });
    // Not waited for: the lease, then the events, leave in this order on the same Redis connection.
    // Refused when a later attempt holds or ended the job (this run was paused since its claim):
    // then the run's events are refused too.
    const leaseMs = Math.max(0, (job.runDeadlineAt?.getTime() ?? Date.now()) - Date.now()) + (STORING_ALLOWANCE_SECONDS + 600) * 1000;
    void this.d.leases.take(job.id, run.lease, leaseMs).catch(() => undefined);
    void run.status('running').catch(() => undefined);
    let ending: Ending;
    try {
      ending = await run.execute();
    } catch (err) {
      // Most often a dependency that went away mid-run (Redis or PostgreSQL restarting): the job
      // is not at fault, so it runs again rather than failing on its first attempt.
      this.d.log.child({ job_id: jobId })('error', 'job run failed unexpectedly', { err: (err as Error).message });
      ending = { handBack: 'The worker failed while running this job.', code: 'worker_error' };
    }
    this.lostEngine = 'handBack' in ending && ending.code === undefined;
    await run.conclude(ending);
  }
}
