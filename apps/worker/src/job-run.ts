import type { Job } from '#libs/db';
import { EngineValidationError, pythonJsonDumps, type EngineMessage } from '#libs/engine-protocol';
import { endedJobText, expiryError, isOwnDeadline, leaseToken, type EndedOutput, type Outcome, type RunLease } from '#libs/jobs';
import type { Log } from '#libs/logging';
import { jobExecutionObserved } from '#libs/metrics';
import type { ProgressView } from '#libs/contracts';
import { scopeEngineCache } from './cache-scope.js';
import { removeStagedInputs, stageInputs, stagingFolder, StagingError, type ApiWorkflow, type StagedInputs } from './input-staging.js';
import { OutputStore, OutputStoreError, type OutputBytesView, type StoredOutput } from './output-store.js';
import { PngPromptRewriter, rewritePngPrompt } from './png-prompt.js';
import { PromptWatch } from './prompt-watch.js';
import { refusalMessage } from './refusal.js';
import { RunContext, type EngineOutcome } from './run-context.js';
import type { ReportedOutput } from './output-kinds.js';
import type { RunnerDeps } from './runner-deps.js';
import { TenantView } from './tenant-view.js';
import { Throttle } from './throttle.js';

// Once the engine has finished a job, the time its outputs may still take to store past the run
// deadline. A store that stalls fails long before (ENGINE_STALL_TIMEOUT_MS); this bounds one that
// moves, slowly, a large video for instance.
export const STORING_ALLOWANCE_SECONDS = 15 * 60;

// Once the engine has ended a prompt, the longest the worker waits for the last lines it prints for
// it (RunContext.logSettled); they normally follow the terminal message within a millisecond.
const LOG_TAIL_WAIT_MS = 1000;

/**
 * How a run ends: an outcome to record, or the job handed back to run again elsewhere (once its
 * attempts are used up it fails with `code`). `engineMs`: how long the engine worked on the job in
 * this run, charged with it.
 */
export type Ending = { outcome: Outcome } | { handBack: string; code?: string; engineMs?: number };

/**
 * The stages of one run, in order; the worker reports the current one with its state, so a stuck
 * step shows. `done`: its ending is written (or was not, the job being another's).
 */
export type RunStage = 'staging' | 'submitting' | 'running' | 'storing' | 'concluding' | 'done';

/**
 * An engine message as v1 clients see it: the engine knows the job by this worker's private prompt
 * id, the clients by the job id. `progress_state` repeats the prompt id in each of its nodes.
 */
function withJobPromptId(message: EngineMessage, jobId: string): { type: string; data: Record<string, unknown> } {
  const data: Record<string, unknown> = { ...(message.data as object), prompt_id: jobId };
  const nodes = data.nodes;
  if (message.type === 'progress_state' && typeof nodes === 'object' && nodes !== null && !Array.isArray(nodes)) {
    data.nodes = Object.fromEntries(
      Object.entries(nodes).map(([id, node]) => [id, typeof node === 'object' && node !== null && 'prompt_id' in node ? { ...node, prompt_id: jobId } : node]),
    );
  }
  return { type: message.type, data };
}

/**
 * One run of a claimed job on this worker's engine, as a small state machine: staging (its inputs
 * onto the engine), submitting (the prompt), running (until the engine ends it), storing (the
 * outputs still on their way), concluding (the ending recorded). From outside it is stopped by
 * `cancel` (a tenant's cancel), `deadline` (its run deadline), `shutdown` (SIGTERM: a grace period,
 * then handed back) and it gives way on takeover: everything it records is guarded by its lease
 * (the claim's worker and attempt), so a run whose job another worker took over records nothing.
 */
export class JobRun {
  stage: RunStage = 'staging';
  readonly lease: RunLease;
  /** The lease as Redis holds it: the run's events and messages are sent only while it matches. */
  readonly token: string;
  private readonly log: Log;
  /** Set once the engine context exists: before that a cancel or a stop has nothing to act on (the Redis flag is polled from then on). */
  private control: { cancel: (reason: 'cancel' | 'expired') => void; shutdown: () => void } | null = null;
  /**
   * Every output of the job as this run recorded them, once the run knows it has them all (no
   * output step failed, none recorded by an earlier attempt): sent with the terminal status.
   */
  private recordedOutputs: EndedOutput[] | null = null;
  /** The history messages v1 clients were sent, stored with the ending (v1 history). */
  private runMessages: () => Array<[string, unknown]> = () => [];

  constructor(
    private readonly d: RunnerDeps,
    readonly job: Job,
    private readonly promptId: string,
    private readonly extraData: Promise<Record<string, unknown> | null>,
    /** Whether to wait for the engine's closing log line (see JobRunner); the run reports what it saw. */
    private readonly closingLine: { printed: boolean },
  ) {
    this.lease = { workerId: d.workerId, attempt: job.attempts };
    this.token = leaseToken(this.lease);
    // Every line about this job carries its id.
    this.log = d.log.child({ job_id: job.id });
  }

  get jobId(): string {
    return this.job.id;
  }

  cancel(reason: 'cancel' | 'expired' = 'cancel'): void {
    this.control?.cancel(reason);
  }

  /** The run deadline passed: stopped as a cancel that ends the job expired. */
  deadline(): void {
    this.cancel('expired');
  }

  /** Asked to stop (SIGTERM): the job gets the grace period, then is handed back. */
  shutdown(): void {
    this.control?.shutdown();
  }

  /** Runs the job to its ending (not yet recorded: see `conclude`). */
  async execute(): Promise<Ending> {
    const { db, store, engine, config } = this.d;
    const job = this.job;
    const workflow = job.workflow as unknown as ApiWorkflow;
    const submitted = (job.submittedWorkflow ?? null) as ApiWorkflow | null;
    let inputs: StagedInputs;
    try {
      this.stage = 'staging';
      const scoped = scopeEngineCache(workflow, job.accountId, this.d.definitions());
      inputs = await stageInputs(scoped, submitted, job.accountId, stagingFolder(config.signingSecret, job.accountId), db, store, engine, this.d.models);
    } catch (err) {
      if (err instanceof StagingError) return { outcome: { status: 'failed', error: { code: err.code, message: err.message } } };
      return { handBack: `Could not stage inputs on the engine: ${(err as Error).message}` };
    }
    try {
      return await this.runStaged(inputs);
    } finally {
      this.control = null;
      // Gone from the engine once the job is over, whatever its ending.
      await removeStagedInputs(config.worker.engineInputDir, inputs).catch((err: Error) => this.log('warn', 'staged inputs not removed', { err: err.message }));
    }
  }

  private async runStaged(inputs: StagedInputs): Promise<Ending> {
    const { db, jobs, engine, socket, store, events, config, keys, redis } = this.d;
    const { job, lease, token, promptId } = this;
    const jobLog = this.log;
    const staged = inputs.workflow;
    const tenant = new TenantView(inputs.tenantNames, inputs.folder);
    // Saved images carry the workflow the tenant sent, not the one the engine ran (staged names,
    // cache scope). Written out for the first image only: the prompt does not wait for it.
    let promptText: string | null = null;
    const isPng = (name: string) => name.toLowerCase().endsWith('.png');
    const tenantPrompt = () => (promptText ??= pythonJsonDumps(job.submittedWorkflow ?? job.workflow));
    const tenantBytes: OutputBytesView = {
      stream: (name, bytes) => {
        if (!isPng(name)) return bytes;
        const rewriter = new PngPromptRewriter(tenantPrompt());
        bytes.on('error', (err) => rewriter.destroy(err));
        return bytes.pipe(rewriter);
      },
      whole: (name, bytes) => (isPng(name) ? rewritePngPrompt(bytes, tenantPrompt()) : bytes),
    };
    const outputs = new OutputStore(db, store, engine, events, jobLog, lease, tenantBytes);
    const stored: StoredOutput[] = [];
    let outputFailure: Error | null = null;
    let outputStepFailed = false;
    // Outputs are stored, and v1 messages forwarded, strictly in the engine's order.
    let chain: Promise<void> = Promise.resolve();
    const enqueue = (step: () => Promise<void>) => {
      chain = chain.then(step).catch((err: unknown) => {
        outputStepFailed = true;
        if (err instanceof OutputStoreError) outputFailure = err;
        else jobLog('warn', 'output step failed', { err: (err as Error).message });
      });
    };
    // Only an error names the job's inputs (`current_inputs`, its message and traceback), unless
    // staged file names can appear anywhere.
    const tenantMessage = (message: EngineMessage): EngineMessage => (inputs.folder !== null || message.type === 'execution_error' ? tenant.value(message) : message);
    const forwardV1 = (message: EngineMessage) =>
      events.publishLeased({
        accountId: job.accountId,
        jobId: job.id,
        text: JSON.stringify(withJobPromptId(tenantMessage(message), job.id)),
      }, token);

    // The final snapshot is written with the ending: a job that ends within a second (most small
    // images) writes no snapshot of its own, one statement fewer in each.
    const persist = new Throttle(1000, { fromStart: true });
    const announce = new Throttle(500);
    const previewGate = new Throttle(500);
    let latestProgress: ProgressView | null = null;
    const ctx = new RunContext(promptId, staged, config.worker.logCaptureBytes, {
      progress: (snapshot, final) => {
        latestProgress = snapshot;
        const write = () => jobs.saveProgress(job.id, snapshot, lease);
        const send = () => events.append(job.id, job.accountId, 'progress', snapshot, token).then(() => undefined);
        if (final) {
          persist.cancel();
          announce.cancel();
          // The final snapshot is persisted with the terminal status (JobStore.finish); here it is
          // only announced, in line behind the outputs.
          enqueue(async () => {
            void send().catch(() => undefined);
          });
        } else {
          persist.run(() => void write().catch(() => undefined));
          announce.run(() => void send().catch(() => undefined));
        }
      },
      preview: (image, mimeType, nodeId, metadata) => {
        // In line with the forwarded messages: v1 clients get a preview before its step's progress.
        enqueue(() => events.publishLeased({
          accountId: job.accountId,
          jobId: job.id,
          preview: {
            imageType: mimeType === 'image/png' ? 'png' : 'jpeg',
            base64: image.toString('base64'),
            metadata: { ...(metadata ?? {}), node_id: nodeId ?? '', prompt_id: job.id, display_node_id: metadata?.display_node_id ?? nodeId ?? '', parent_node_id: metadata?.parent_node_id ?? null, real_node_id: metadata?.real_node_id ?? nodeId ?? '', image_type: mimeType },
          },
        }, token));
        previewGate.run(() => void events.append(job.id, job.accountId, 'preview', { node_id: nodeId ?? '', content_type: mimeType, data_base64: image.toString('base64') }, token).catch(() => undefined));
      },
      outputs: (nodeId, reported: ReportedOutput[], message) => {
        enqueue(async () => {
          const refs: Record<string, unknown[]> = {};
          const original = ((message?.data as { output?: Record<string, unknown[]> } | undefined)?.output ?? {}) as Record<string, unknown[]>;
          for (const [key, list] of Object.entries(original)) refs[key] = Array.isArray(list) ? [...list] : list;
          for (const item of reported) {
            const saved = await outputs.save(job, nodeId, item);
            stored.push(saved);
            if (item.kind === 'file' && Array.isArray(refs[item.key])) refs[item.key]![item.index] = saved.v1Ref;
          }
          // Not waited for, like the other forwarded messages: the connection keeps their order.
          // Images sent only over the socket came with no `executed` (message null): none to forward.
          if (message) void forwardV1({ type: 'executed', data: { ...(message.data as object), output: refs } }).catch((err: Error) => jobLog('warn', 'executed message not forwarded', { err: err.message }));
        });
      },
      // In line behind any output still being stored, but not waited for: commands on one Redis
      // connection keep their order, so later messages still follow.
      forward: (message) =>
        enqueue(async () => {
          void forwardV1(message).catch(() => undefined);
        }),
      progressText: (nodeId, text) =>
        enqueue(async () => {
          void events.publishLeased({ accountId: job.accountId, jobId: job.id, progressText: { nodeId, text } }, token).catch(() => undefined);
        }),
    });

    // History keeps what the socket was sent (forwardV1): the tenant's view of each message.
    this.runMessages = () => ctx.historyMessages.map((m) => withJobPromptId(tenantMessage(m), job.id)).map(({ type, data }) => [type, data]);
    const onMessage = (m: EngineMessage) => ctx.onMessage(m);
    const onBinary = (f: Parameters<typeof ctx.onBinary>[0]) => ctx.onBinary(f);
    socket.on('message', onMessage);
    socket.on('binary', onBinary);

    let canceled: 'cancel' | 'expired' | null = null;
    let stopping = false;
    const interrupt = async () => {
      await engine.deleteFromQueue([promptId]).catch(() => undefined);
      await engine.interrupt(promptId).catch(() => undefined);
    };
    const cancelWatch = setInterval(() => {
      void redis.get(keys.cancelFlag(job.id)).then((flag) => {
        if (flag && !canceled) this.cancel(flag === 'expired' ? 'expired' : 'cancel');
      }).catch(() => undefined);
    }, 1000);
    const deadlineMs = (job.runDeadlineAt?.getTime() ?? Date.now() + config.jobs.executionTimeoutSeconds * 1000) - Date.now();
    const deadline = setTimeout(() => this.deadline(), Math.max(0, deadlineMs));
    let handBackReason: string | null = null;
    let shutdownTimer: NodeJS.Timeout | undefined;
    const watch = new PromptWatch(engine, socket, ctx, (reason) => {
      handBackReason = reason;
      ctx.end({ kind: 'interrupted' });
    });
    const stopPrompt = () =>
      void interrupt().then(async () => {
        // A prompt deleted while it waited in the engine's queue (or never sent) produces no message.
        if ((await watch.locate()) === 'nowhere' && !ctx.done) ctx.end({ kind: 'interrupted' });
      });
    this.control = {
      cancel: (reason) => {
        if (canceled || ctx.done) return;
        canceled = reason;
        // Until the engine has the prompt there is nothing there to stop: a delete or interrupt
        // would arrive first and the prompt after it, to run with nobody waiting for it. The
        // submitting stage stops it (or skips it) instead.
        if (this.stage === 'running') stopPrompt();
      },
      shutdown: () => {
        if (stopping) return;
        stopping = true;
        shutdownTimer = setTimeout(() => {
          handBackReason = 'The worker was shut down before the job finished.';
          void interrupt();
          ctx.end({ kind: 'interrupted' });
        }, config.worker.shutdownGraceMs);
      },
    };
    let result: EngineOutcome;
    // From the engine's acceptance of the prompt to its end: the time the job is charged for.
    let engineStart: number | null = null;
    let engineMs = 0;
    try {
      const extra = await this.extraData;
      try {
        this.stage = 'submitting';
        // Canceled before it was sent: the engine never hears of it (stopPrompt below ends the run).
        if (!canceled) {
          jobLog('debug', 'submitting prompt to the engine', { engine_prompt_id: promptId });
          await engine.submitPrompt({ prompt: staged, client_id: socket.clientId, prompt_id: promptId, extra_data: extra ?? {} });
          engineStart = performance.now();
        }
      } catch (err) {
        if (err instanceof EngineValidationError) {
          const refusal = refusalMessage(tenant.value(err.body));
          return { outcome: { status: 'failed', error: { code: 'prompt_rejected', message: refusal.message, node_id: refusal.nodeId, class_type: refusal.classType } } };
        }
        return { handBack: `The engine did not accept the prompt: ${(err as Error).message}` };
      }
      this.stage = 'running';
      // A cancel (or deadline) that came while the prompt was on its way is carried out now.
      if (canceled) stopPrompt();
      watch.start();
      result = await ctx.outcome;
      if (engineStart !== null) engineMs = performance.now() - engineStart;
      // The end came over the socket, but an `executed` may have been lost in a break before it.
      if (watch.missedMessages && !handBackReason) {
        const history = await watch.endedHistory();
        if (history) ctx.settleFromHistory(history);
        else jobLog('warn', 'no engine history to check for outputs the socket missed', { engine_prompt_id: promptId });
      }
      // The log is written with the terminal status, so a client that sees the status can read it
      // at once: it must hold the lines the engine prints after its terminal message too. The
      // outputs are being stored meanwhile.
      if (!handBackReason) this.closingLine.printed = this.closingLine.printed ? await ctx.logSettled(LOG_TAIL_WAIT_MS) : ctx.logEndedYet();
    } finally {
      clearInterval(cancelWatch);
      // A progress or preview still waiting for its throttle's turn goes out now: fired later, it
      // would land in the log after the terminal status, where no event stream delivers it.
      persist.flush();
      announce.flush();
      previewGate.flush();
      clearTimeout(deadline);
      clearTimeout(shutdownTimer);
      watch.stop();
      socket.off('message', onMessage);
      socket.off('binary', onBinary);
    }
    this.stage = 'storing';
    // The engine finished within the deadline (the worker's own timer stops it otherwise): the
    // outputs still on their way must not make the job late.
    if (!canceled && !handBackReason && job.runDeadlineAt && job.runDeadlineAt.getTime() - Date.now() < STORING_ALLOWANCE_SECONDS * 1000) {
      await jobs.extendRunDeadline(job.id, STORING_ALLOWANCE_SECONDS, lease).catch((err: Error) => jobLog('warn', 'run deadline not extended for storing outputs', { err: err.message }));
    }
    await chain;
    if (!outputStepFailed && stored.every((s) => s.recorded)) this.recordedOutputs = stored.map((s) => s.recorded!);
    const captured = ctx.log.result();
    const log = captured && { ...captured, text: tenant.text(captured.text) };
    if (handBackReason) return { handBack: handBackReason, engineMs };
    if (result.kind === 'success') {
      // Outputs the service could not keep are its own failure: the job costs nothing.
      if (outputFailure) return { outcome: { status: 'failed', error: { code: 'output_store_failed', message: (outputFailure as Error).message }, log, free: true } };
      return { outcome: { status: 'succeeded', log, progress: latestProgress, engineMs } };
    }
    if (result.kind === 'error') {
      // The engine's exception type is kept so v1 history can report it as the engine did.
      const error = { code: 'node_execution_error', message: tenant.text(result.message), node_id: result.nodeId, class_type: result.classType, traceback: result.traceback ? tenant.text(result.traceback) : null, exception_type: result.exceptionType };
      return { outcome: { status: 'failed', error, log, engineMs } };
    }
    if (canceled === 'expired') return { outcome: { status: 'expired', error: expiryError('run', isOwnDeadline(job)), log, engineMs } };
    if (canceled === 'cancel') return { outcome: { status: 'canceled', log, engineMs } };
    return { outcome: { status: 'failed', error: { code: 'interrupted', message: 'The engine interrupted the job.' }, log, engineMs } };
  }

  /**
   * Records the ending: the job handed back (while attempts are left and it still runs here), or
   * its outcome with its charge. Every write is guarded by the lease; when the store finds the job
   * no longer this run's, the run gives way (`tookOver`).
   */
  async conclude(ending: Ending): Promise<void> {
    this.stage = 'concluding';
    const { jobs, config } = this.d;
    const { job, lease } = this;
    if ('handBack' in ending) {
      const latest = await jobs.get(job.id);
      if (latest && latest.attempts < config.jobs.maxAttempts && latest.status === 'running') {
        // The engine's time in this run is charged when the job ends, with the runs after it.
        const patch = { dispatchedAt: null, workerId: null, billedMs: { increment: Math.round(ending.engineMs ?? 0) } };
        const back = await jobs.transition(job.id, ['running'], 'queued', patch, { workerId: lease.workerId, attempts: lease.attempt });
        if (back) {
          this.log('warn', 'job handed back', { reason: ending.handBack });
          await this.status('queued');
          await this.d.leases.end(job.id, lease.attempt);
          this.stage = 'done';
          return;
        }
      }
      if (latest?.status === 'canceling') ending = { outcome: { status: 'canceled', engineMs: ending.engineMs } };
      else ending = { outcome: { status: 'failed', error: { code: ending.code ?? 'engine_unavailable', message: ending.handBack }, engineMs: ending.engineMs } };
    }
    const done = await jobs.finish(job.id, { ...ending.outcome, engineMessages: this.runMessages() }, config.jobs.creditsPerSecond, new Date(), lease);
    if (!done) {
      this.tookOver();
      return;
    }
    // The status first: clients wait on it. With it, the job as it ended, when this run knows all
    // its outputs (a first attempt's: a later one may not see those of the attempts before it).
    const ended = this.recordedOutputs && lease.attempt === 1 ? endedJobText(done, this.recordedOutputs) : null;
    if (ended) await this.d.events.appendEnded(job.id, job.accountId, { status: done.status, queue_position: null }, this.token, ended);
    else await this.status(done.status);
    jobExecutionObserved(done.status, (done.executionMs ?? 0) / 1000);
    const error = ending.outcome.error;
    this.log(done.status === 'succeeded' || done.status === 'canceled' ? 'info' : 'warn', 'job finished', {
      status: done.status,
      execution_ms: done.executionMs,
      ...(error ? { error_code: error.code } : {}),
    });
    // After the status: clients wait on that, nobody waits on these. Sent together, they share one write.
    await Promise.all([this.d.leases.end(job.id, lease.attempt), this.d.vault.delete(job.id)]);
    this.stage = 'done';
  }

  /**
   * The job ended meanwhile (the sweeper's deadline) or another worker took it over, which still
   * needs its secrets and its lease: this run records nothing more.
   */
  private tookOver(): void {
    this.log('warn', 'job not finished by this run: it ended meanwhile or another worker took it over', { attempt: this.lease.attempt });
    this.stage = 'done';
  }

  /** Announces a status of the job, while the run holds its lease. */
  async status(status: string): Promise<void> {
    await this.d.events.append(this.job.id, this.job.accountId, 'status', { status, queue_position: null }, this.token);
  }
}
