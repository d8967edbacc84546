import type { EngineClient, EngineSocket, HistoryEntry } from '#libs/engine-protocol';
import type { RunContext } from './run-context.js';

const ENGINE_LOST_MS = 30_000;
const CHECK_EVERY_MS = 1000;

/**
 * Watches the engine while a prompt runs, for what the message stream alone cannot tell.
 *
 * The engine sends a prompt's messages only to the socket connected at that moment; whatever it
 * sends while the worker's socket is down is gone. So after any break in the socket (and while
 * it stays down), the prompt is looked up: still queued or running on the engine means its later
 * messages will arrive; found in the history means it ended, and the history says how (and which
 * outputs it made); in neither means the engine restarted and lost it. An engine that stops
 * answering altogether for too long also loses the job.
 */
export class PromptWatch {
  /** The socket broke during the run: messages, `executed` among them, may have been missed. */
  missedMessages: boolean;
  private gap: boolean;
  private downSince: number | null = null;
  private busy = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly onClose = () => {
    this.gap = true;
    this.missedMessages = true;
  };

  constructor(
    private readonly engine: EngineClient,
    private readonly socket: EngineSocket,
    private readonly ctx: RunContext,
    private readonly lost: (reason: string) => void,
  ) {
    this.gap = !socket.isOpen;
    this.missedMessages = this.gap;
    socket.on('close', this.onClose);
  }

  /** Once the engine accepted the prompt: before that, not finding it means nothing. */
  start(): void {
    this.timer = setInterval(() => {
      if (this.busy || this.ctx.done) return;
      this.busy = true;
      void this.check().finally(() => (this.busy = false));
    }, CHECK_EVERY_MS);
  }

  stop(): void {
    clearInterval(this.timer);
    this.socket.off('close', this.onClose);
  }

  /**
   * The prompt's history once it ended. The engine records it just after sending the last
   * message, so a look-up right after that message may come a moment too early.
   */
  async endedHistory(): Promise<HistoryEntry | undefined> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const entry = await this.engine.history(this.ctx.promptId).catch(() => undefined);
      if (entry) return entry;
      await new Promise((r) => setTimeout(r, 200));
    }
    return undefined;
  }

  private async check(): Promise<void> {
    const up = await this.engine.ready(1500);
    if (!up) {
      this.downSince ??= Date.now();
      if (Date.now() - this.downSince > ENGINE_LOST_MS) this.lost('The engine stopped answering.');
      return;
    }
    // Back after being away: a restart empties the engine's queue and history, and drops the socket.
    if (this.downSince !== null) this.gap = true;
    this.downSince = null;
    if (this.gap) await this.lookUp();
  }

  /**
   * Where the engine has the prompt: still in its queue (waiting or running), ended (its history
   * entry), or nowhere (never sent, deleted while waiting, or lost in a restart); null when the
   * engine did not answer.
   */
  async locate(): Promise<'queued' | 'nowhere' | HistoryEntry | null> {
    const queue = await this.engine.queue().catch(() => null);
    if (!queue) return null;
    if ([...queue.queue_running, ...queue.queue_pending].some((item) => item[1] === this.ctx.promptId)) return 'queued';
    // Asked after the queue: a prompt that left the queue is in the history by then.
    const history = await this.engine.history(this.ctx.promptId).catch(() => null);
    if (history === null) return null;
    return history ?? 'nowhere';
  }

  private async lookUp(): Promise<void> {
    // Only a socket open before the look-up is sure to carry every message after it.
    const openBefore = this.socket.isOpen;
    const where = await this.locate();
    if (where === null || this.ctx.done) return;
    if (where === 'queued') {
      if (openBefore) this.gap = false;
    } else if (where === 'nowhere') {
      this.lost('The engine restarted and lost the prompt.');
    } else {
      this.ctx.settleFromHistory(where);
    }
  }
}
