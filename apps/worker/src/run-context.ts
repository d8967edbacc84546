import type { BinaryFrame, EngineMessage, HistoryEntry } from '#libs/engine-protocol';
import { ProgressTracker } from '#libs/jobs';
import type { ProgressView } from '#libs/contracts';
import { LogCapture } from './log-capture.js';
import { reportedOutputs, type ReportedOutput } from './output-kinds.js';
import type { ApiWorkflow } from './input-staging.js';

export type EngineOutcome =
  | { kind: 'success' }
  | { kind: 'error'; nodeId: string | null; classType: string | null; message: string; exceptionType: string; traceback: string }
  | { kind: 'interrupted' };

export interface RunHooks {
  progress(snapshot: ProgressView, final: boolean): void;
  preview(image: Buffer, mimeType: string, nodeId: string | null, metadata: Record<string, unknown> | null): void;
  /**
   * Outputs of one node, in the order reported. `message` is the `executed` message that reported
   * them, for the v1 WebSocket; null for images the node sent only over the socket (the engine
   * sends no `executed` for those, so v1 clients get none either).
   */
  outputs(nodeId: string, outputs: ReportedOutput[], message: EngineMessage | null): void;
  /** Every other execution message of this prompt, for the v1 WebSocket. */
  forward(message: EngineMessage): void;
  /** A node's progress text (a TEXT binary frame), for the v1 WebSocket. */
  progressText(nodeId: string, text: string): void;
}

/**
 * The line the engine prints once a prompt is over, whatever its outcome (ComfyUI's main.py, after
 * `execution_success` / `_error` / `_interrupted` and the closing `executing` with `node: null`;
 * the sim-engine does the same). Nothing more is printed for that prompt after it.
 */
const PROMPT_DONE_LINE = /^Prompt executed in /m;

/** The messages the engine keeps in a prompt's history (`status.messages`), as execution.py adds them. */
const HISTORY_MESSAGES = new Set(['execution_start', 'execution_cached', 'execution_success', 'execution_error', 'execution_interrupted']);

interface DataWithPrompt {
  prompt_id?: string;
}

/** The nodes no other node of the workflow takes an input from. */
function sinkNodes(workflow: ApiWorkflow): Set<string> {
  const used = new Set<string>();
  for (const node of Object.values(workflow)) {
    for (const value of Object.values(node.inputs ?? {})) {
      if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'number') used.add(value[0]);
    }
  }
  return new Set(Object.keys(workflow).filter((id) => !used.has(id)));
}

/**
 * Follows one prompt through the engine's message stream: turns messages into progress, previews,
 * outputs and a final outcome. The engine runs one prompt at a time, so type-1 previews (which
 * carry no prompt id) belong to whatever is executing.
 */
export class RunContext {
  readonly tracker: ProgressTracker;
  readonly log: LogCapture;
  private settle!: (outcome: EngineOutcome) => void;
  readonly outcome: Promise<EngineOutcome>;
  private started = false;
  /** Nodes whose outputs were already handed on, so history does not report them twice. */
  private readonly reported = new Set<string>();
  /**
   * Images sink nodes sent over the socket, by node, until the node is done. The engine runs only
   * output nodes and what they need, so a sink that runs is an output node: one that ends without
   * an `executed` (SaveImageWebsocket, or any node that returns images only over the socket) made
   * these images as its outputs. Previews of other nodes (a sampler's) are never kept.
   */
  private readonly socketImages = new Map<string, { data: Buffer; contentType: string }[]>();
  private readonly sinks: Set<string>;
  /** The history messages handed on to v1 clients so far, in order: the job's v1 history shows these. */
  readonly historyMessages: EngineMessage[] = [];
  done = false;
  /** The engine said how the prompt ended (a terminal message, or its history). */
  private concluded = false;
  private logEndSeen = false;
  private logEnded!: () => void;
  private readonly logEnd = new Promise<void>((resolve) => (this.logEnded = resolve));

  constructor(
    readonly promptId: string,
    workflow: ApiWorkflow,
    logBytes: number,
    private readonly hooks: RunHooks,
  ) {
    this.tracker = new ProgressTracker(workflow);
    this.sinks = sinkNodes(workflow);
    this.log = new LogCapture(logBytes);
    this.outcome = new Promise((resolve) => (this.settle = resolve));
  }

  end(outcome: EngineOutcome): void {
    if (this.done) return;
    this.done = true;
    this.settle(outcome);
  }

  onMessage(message: EngineMessage): void {
    if (message.type === 'logs') {
      const entries = (message.data as { entries?: { m?: unknown }[] }).entries ?? [];
      for (const e of entries) {
        if (typeof e.m !== 'string') continue;
        this.log.add(e.m);
        // Only after the terminal message: an earlier one is a previous prompt's.
        if (this.concluded && PROMPT_DONE_LINE.test(e.m)) {
          this.logEndSeen = true;
          this.logEnded();
        }
      }
      return;
    }
    const data = (message.data ?? {}) as DataWithPrompt & Record<string, unknown>;
    if (data.prompt_id !== this.promptId || this.done) return;
    switch (message.type) {
      case 'execution_start':
        this.started = true;
        this.forward(message);
        this.hooks.progress(this.tracker.snapshot(), false);
        return;
      case 'execution_cached':
        this.tracker.cached((data.nodes as string[] | undefined) ?? []);
        this.forward(message);
        this.hooks.progress(this.tracker.snapshot(), false);
        return;
      case 'executing':
        // The engine runs one node at a time: the next one starting means the others are done.
        this.commitSocketImages((node) => node !== data.node);
        this.tracker.executing((data.node as string | null | undefined) ?? null);
        this.hooks.forward(message);
        if (data.node !== null) this.hooks.progress(this.tracker.snapshot(), false);
        return;
      case 'progress':
        this.tracker.stepped(String(data.node), Number(data.value), Number(data.max));
        this.hooks.forward(message);
        this.hooks.progress(this.tracker.snapshot(), false);
        return;
      case 'executed': {
        const nodeId = String(data.node);
        this.tracker.finished(nodeId);
        this.reported.add(nodeId);
        // A node that reports its outputs sent previews, not outputs, over the socket.
        this.socketImages.delete(nodeId);
        this.hooks.outputs(nodeId, reportedOutputs(data.output as Record<string, unknown> | null), message);
        this.hooks.progress(this.tracker.snapshot(), false);
        return;
      }
      case 'execution_success':
      case 'execution_error':
      case 'execution_interrupted':
        this.conclude(message);
        return;
      default:
        this.hooks.forward(message);
    }
  }

  /**
   * The prompt's record in the engine's history, for when the socket may have missed messages:
   * outputs not yet handed on are stored now (history lists cached nodes' outputs too), and if
   * the run is still open, the terminal message history kept ends it.
   */
  settleFromHistory(entry: HistoryEntry): void {
    for (const [nodeId, output] of Object.entries(entry.outputs ?? {})) {
      if (this.reported.has(nodeId)) continue;
      this.reported.add(nodeId);
      const display = entry.meta?.[nodeId]?.display_node ?? nodeId;
      const message = { type: 'executed', data: { node: nodeId, display_node: display, output, prompt_id: this.promptId } };
      if (!this.done) this.tracker.finished(nodeId);
      this.hooks.outputs(nodeId, reportedOutputs(output), message);
    }
    if (this.done) return;
    const messages = entry.status?.messages ?? [];
    // The engine's own ending, timestamp and all: v1 clients and the job's history get it as kept.
    const terminal = messages.find(([type]) => type === 'execution_error' || type === 'execution_interrupted' || type === 'execution_success');
    if (terminal) this.conclude({ type: terminal[0], data: terminal[1] });
    else if (entry.status?.status_str === 'success') this.conclude({ type: 'execution_success', data: { prompt_id: this.promptId } });
    else this.conclude({ type: 'execution_error', data: { prompt_id: this.promptId, exception_message: 'The engine recorded the prompt as failed without saying why.' } });
  }

  /**
   * Resolves once the engine printed the last line for this prompt (true), or after `maxMs`
   * (false; true also when the engine never ended the prompt, as nothing was to be waited for).
   *
   * The engine pushes what it prints as `logs` messages, apart from its execution messages and
   * batched (the sim flushes on the next turn of its event loop), and prints the prompt's last lines
   * ("!!! Exception during processing !!!" and its traceback, "Prompt executed in …") around or
   * after the terminal message: a log taken at that message misses them. The closing line comes
   * right behind it, so this rarely waits more than a moment; `maxMs` bounds an engine that never
   * prints it. Not waited for when the engine never ended the prompt (never sent, deleted from its
   * queue, lost). An empty capture is no sign of a missing log: a quick prompt may be over before
   * the engine flushes even its "got prompt".
   */
  async logSettled(maxMs: number): Promise<boolean> {
    if (!this.concluded) return true;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.logEnd, new Promise<void>((resolve) => (timer = setTimeout(resolve, maxMs)))]);
    clearTimeout(timer);
    return this.logEndSeen;
  }

  /** Whether the prompt's closing line has come already (see logSettled). */
  logEndedYet(): boolean {
    return this.logEndSeen;
  }

  /**
   * Hands on the images of the nodes `done` says are done, as their outputs. A node the prompt
   * failed or was interrupted in did not finish: what it sent is not an output.
   */
  private commitSocketImages(done: (nodeId: string) => boolean): void {
    for (const [nodeId, images] of [...this.socketImages]) {
      if (!done(nodeId)) continue;
      this.socketImages.delete(nodeId);
      if (this.reported.has(nodeId)) continue;
      this.reported.add(nodeId);
      this.hooks.outputs(
        nodeId,
        images.map((image, index) => ({ kind: 'bytes', key: 'images', data: image.data, contentType: image.contentType, index })),
        null,
      );
    }
  }

  private conclude(message: EngineMessage): void {
    const data = (message.data ?? {}) as Record<string, unknown>;
    const failedAt = message.type === 'execution_success' ? null : typeof data.node_id === 'string' ? data.node_id : undefined;
    this.commitSocketImages((node) => failedAt !== undefined && node !== failedAt);
    this.concluded = true;
    this.forward(message);
    if (message.type === 'execution_success') {
      this.tracker.complete();
      this.hooks.progress(this.tracker.snapshot(), true);
      this.end({ kind: 'success' });
    } else if (message.type === 'execution_interrupted') {
      this.end({ kind: 'interrupted' });
    } else {
      const tb = data.traceback;
      this.end({
        kind: 'error',
        nodeId: typeof data.node_id === 'string' ? data.node_id : null,
        classType: typeof data.node_type === 'string' ? data.node_type : null,
        message: String(data.exception_message ?? 'The engine reported an error.').trim(),
        exceptionType: String(data.exception_type ?? 'Exception'),
        traceback: Array.isArray(tb) ? tb.join('') : String(tb ?? ''),
      });
    }
  }

  onBinary(frame: BinaryFrame): void {
    if (this.done || !this.started) return;
    if (frame.kind === 'preview_image') {
      const nodeId = this.tracker.snapshot().current_node;
      this.keepSocketImage(nodeId, frame.image, frame.mimeType);
      this.hooks.preview(frame.image, frame.mimeType, nodeId, null);
    } else if (frame.kind === 'preview_image_with_metadata' && frame.metadata.prompt_id === this.promptId) {
      this.keepSocketImage(frame.metadata.node_id, frame.image, frame.mimeType);
      this.hooks.preview(frame.image, frame.mimeType, frame.metadata.node_id, frame.metadata);
    } else if (frame.kind === 'text') {
      this.hooks.progressText(frame.nodeId, frame.text);
    }
  }

  private forward(message: EngineMessage): void {
    if (HISTORY_MESSAGES.has(message.type)) this.historyMessages.push(message);
    this.hooks.forward(message);
  }

  private keepSocketImage(nodeId: string | null, image: Buffer, contentType: string): void {
    if (nodeId === null || !this.sinks.has(nodeId) || this.reported.has(nodeId)) return;
    const images = this.socketImages.get(nodeId) ?? [];
    // A copy: the frame's bytes may be a view of a buffer the socket reuses.
    images.push({ data: Buffer.from(image), contentType });
    this.socketImages.set(nodeId, images);
  }
}
