import type { Job } from '#libs/db';
import { encodePreviewImageFrame, encodePreviewImageWithMetadataFrame, encodeTextFrame, mimeToImageFormat, type LogEntry, type PreviewMetadata } from '#libs/engine-protocol';
import type { AccountMessage, PublishedJobEvent } from '#libs/jobs';
import type { EventFanout } from '../../jobs/event-fanout.js';
import type { JobScope } from '../../jobs/job-views.service.js';
import { cloudEnding } from '../jobs/v1-status.js';
import type { ClientSocket } from './client-socket.js';

export interface FeedDeps {
  fanout: EventFanout;
  /** The scope's jobs waiting or running, the engine's `queue_remaining`. */
  queueRemaining(scope: JobScope, excluding?: string): Promise<number>;
  job(jobId: string): Promise<Pick<Job, 'id' | 'status' | 'error' | 'progress' | 'startedAt' | 'completedAt' | 'updatedAt' | 'attempts' | 'deploymentId'> | null>;
  /** Client ids of the account that asked for its log lines (`PATCH /internal/logs/subscribe`). */
  logSubscribers(accountId: string): Promise<Set<string>>;
  /** The log lines a job wrote, kept with it when it ended. */
  jobLog(jobId: string): Promise<LogEntry[]>;
}

const TERMINAL_MESSAGES = new Set(['execution_success', 'execution_error', 'execution_interrupted']);
const TERMINAL_STATUSES = new Set(['succeeded', 'failed', 'canceled', 'expired']);
/** Work items waiting in one account's feed; past this, previews are dropped rather than queued. */
const MAX_BACKLOG = 2_000;
const REMEMBERED_PROMPTS = 1_000;

/** A bounded set of recent prompt ids. */
class RecentIds {
  private readonly ids = new Set<string>();
  add(id: string): void {
    this.ids.delete(id);
    this.ids.add(id);
    if (this.ids.size > REMEMBERED_PROMPTS) this.ids.delete(this.ids.values().next().value!);
  }
  has(id: string): boolean {
    return this.ids.has(id);
  }
}

/**
 * Everything one account's sockets on this replica receive (on the deployment surface, one
 * deployment's sockets, of its jobs only, as v2 scopes them), in one ordered stream: the engine
 * messages workers forward (through Redis, from any worker), plus what the engine would send and
 * the worker cannot: `status` queue counts as the account's jobs come and go, the closing
 * `executing {node: null}` after a prompt ends, and an `execution_error` (or
 * `execution_interrupted`) for jobs that ended without the engine saying so, e.g. an input that
 * could not be staged. Work runs one item at a time so synthesized messages keep their place.
 */
export class AccountFeed {
  readonly sockets = new Set<ClientSocket>();
  /** Sockets accepted whose greeting has not been sent yet. */
  joining = 0;
  private chain: Promise<void> = Promise.resolve();
  private backlog = 0;
  private readonly started = new RecentIds();
  /** Prompts whose engine said they ended, waiting for their job's terminal status. */
  private readonly finishing = new RecentIds();
  private readonly ended = new RecentIds();
  /** Jobs whose log lines went to the subscribed sockets. */
  private readonly logged = new RecentIds();
  /** Whether a job is in this feed's deployment: a job never moves, so the answer is kept. */
  private readonly inDeployment = new Map<string, boolean>();
  private readonly unsubscribe: Array<() => void>;

  constructor(
    readonly scope: JobScope,
    private readonly deps: FeedDeps,
  ) {
    this.unsubscribe = [
      deps.fanout.onAccount(scope.accountId, (m) => {
        if ((m.preview || m.progressText) && this.backlog > MAX_BACKLOG / 2) return;
        this.enqueue(async () => {
          if (await this.sees(m.jobId)) await this.onEngineMessage(m);
        });
      }),
      deps.fanout.onAccountJobs(scope.accountId, (e) => {
        if (e.event !== 'status') return;
        this.enqueue(async () => {
          if (await this.sees(e.jobId)) await this.onJobStatus(e);
        });
      }),
    ];
  }

  private async sees(jobId: string | undefined): Promise<boolean> {
    const { deploymentId } = this.scope;
    if (deploymentId === null) return true;
    // A worker from before messages named their job: its messages cannot be placed.
    if (!jobId) return false;
    const known = this.inDeployment.get(jobId);
    if (known !== undefined) return known;
    const job = await this.deps.job(jobId);
    // Not kept when not found: the job's row may just not be visible yet.
    if (!job) return false;
    this.inDeployment.set(jobId, job.deploymentId === deploymentId);
    if (this.inDeployment.size > REMEMBERED_PROMPTS) this.inDeployment.delete(this.inDeployment.keys().next().value!);
    return job.deploymentId === deploymentId;
  }

  /** Runs after everything already queued for this account; only `essential` steps pass a full backlog. */
  enqueue(step: () => Promise<void> | void, essential = false): void {
    if (this.backlog >= MAX_BACKLOG && !essential) return;
    this.backlog++;
    this.chain = this.chain
      .then(step)
      .catch(() => undefined)
      .finally(() => this.backlog--);
  }

  close(): void {
    for (const stop of this.unsubscribe) stop();
  }

  private broadcast(type: string, data: unknown): void {
    const text = JSON.stringify({ type, data });
    for (const s of this.sockets) s.sendText(text);
  }

  async sendStatus(excluding?: string): Promise<void> {
    const remaining = await this.deps.queueRemaining(this.scope, excluding);
    this.broadcast('status', { status: { exec_info: { queue_remaining: remaining } } });
  }

  private async onEngineMessage(m: AccountMessage): Promise<void> {
    if (m.preview) return this.onPreview(m.preview);
    if (m.progressText) {
      const frame = encodeTextFrame(m.progressText.nodeId, m.progressText.text);
      for (const s of this.sockets) s.sendExpendable(frame);
      return;
    }
    if (!m.text) return;
    let message: { type?: unknown; data?: Record<string, unknown> };
    try {
      message = JSON.parse(m.text) as typeof message;
    } catch {
      return;
    }
    if (typeof message.type !== 'string' || typeof message.data !== 'object' || message.data === null) return;
    const data = message.data;
    const promptId = typeof data.prompt_id === 'string' ? data.prompt_id : null;
    if (message.type === 'execution_start' && promptId) this.started.add(promptId);
    // As the worker forwarded it, which is what the job's v1 history keeps: `execution_error` with
    // the engine's own exception type.
    for (const s of this.sockets) s.sendText(m.text);
    if (!TERMINAL_MESSAGES.has(message.type) || !promptId) return;
    // Clients read the history on the closing `executing {node: null}`, as the engine writes it
    // before sending that. Ours is written when the worker stores the job's end, just after this
    // message: the closing waits for the job's terminal status, unless that came first.
    if (this.ended.has(promptId)) await this.closePrompt(promptId);
    else this.finishing.add(promptId);
  }

  /** What the engine sends after a prompt ends: the queue count, then `executing` with no node. */
  private async closePrompt(promptId: string): Promise<void> {
    this.ended.add(promptId);
    await this.sendStatus(promptId);
    this.broadcast('executing', { node: null, prompt_id: promptId });
  }

  /** The engine pushes its log lines to subscribed client ids as they are written; a job's arrive when it ends. */
  private async sendLog(jobId: string): Promise<void> {
    if (this.logged.has(jobId) || this.sockets.size === 0) return;
    this.logged.add(jobId);
    const subscribed = await this.deps.logSubscribers(this.scope.accountId);
    const targets = [...this.sockets].filter((s) => subscribed.has(s.sid));
    if (targets.length === 0) return;
    const entries = await this.deps.jobLog(jobId);
    if (entries.length === 0) return;
    const text = JSON.stringify({ type: 'logs', data: { entries, size: null } });
    for (const s of targets) s.sendText(text);
  }

  private onPreview(preview: NonNullable<AccountMessage['preview']>): void {
    const image = Buffer.from(preview.base64, 'base64');
    const mime = preview.imageType === 'png' ? 'image/png' : 'image/jpeg';
    const meta = preview.metadata;
    let legacy: Buffer | null = null;
    let withMetadata: Buffer | null = null;
    for (const s of this.sockets) {
      if (s.supportsPreviewMetadata) {
        withMetadata ??= encodePreviewImageWithMetadataFrame(image, {
          node_id: String(meta.node_id ?? ''),
          prompt_id: String(meta.prompt_id ?? ''),
          display_node_id: String(meta.display_node_id ?? meta.node_id ?? ''),
          parent_node_id: (meta.parent_node_id as string | null | undefined) ?? null,
          real_node_id: String(meta.real_node_id ?? meta.node_id ?? ''),
          image_type: mime,
        } satisfies PreviewMetadata);
        s.sendExpendable(withMetadata);
      } else {
        legacy ??= encodePreviewImageFrame(image, mimeToImageFormat(mime));
        s.sendExpendable(legacy);
      }
    }
  }

  private async onJobStatus(e: PublishedJobEvent): Promise<void> {
    let status: string;
    try {
      status = String((JSON.parse(e.data) as { status?: unknown }).status);
    } catch {
      return;
    }
    if (status === 'queued' || status === 'running') {
      if (status === 'queued') {
        const job = await this.deps.job(e.jobId);
        if (job && job.attempts > 0) {
          this.broadcast('notification', { value: 'The machine running your job went away; it is queued again and will restart shortly.', prompt_id: e.jobId });
        }
      }
      return this.sendStatus();
    }
    if (!TERMINAL_STATUSES.has(status)) return;
    await this.sendLog(e.jobId);
    if (this.ended.has(e.jobId)) return;
    // The engine's own ending went out already: only the closing is left.
    if (this.finishing.has(e.jobId)) return this.closePrompt(e.jobId);
    const job = await this.deps.job(e.jobId);
    const ending = job ? cloudEnding(job, this.started.has(e.jobId)) : null;
    if (ending) {
      const [type, data] = ending;
      this.broadcast(type, data);
      if (type === 'execution_error') this.broadcast('notification', { value: data.exception_message, prompt_id: e.jobId });
      return this.closePrompt(e.jobId);
    }
    this.ended.add(e.jobId);
    return this.sendStatus(e.jobId);
  }
}
