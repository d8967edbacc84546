/**
 * The engine's PromptQueue: pending items ordered by (number, prompt_id), one running item
 * at a time, and an in-memory history (lost on restart, as on the engine).
 */
import type { HistoryEntry, HistoryStatus, QueueItem } from '#libs/engine-protocol';

const MAXIMUM_HISTORY_SIZE = 10000;
export const SENSITIVE_EXTRA_DATA_KEYS = ['auth_token_comfy_org', 'api_key_comfy_org'];

function compareItems(a: QueueItem, b: QueueItem): number {
  if (a[0] !== b[0]) return a[0] - b[0];
  return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
}

function stripSensitive(item: QueueItem): QueueItem {
  const extra = { ...item[3] };
  for (const k of SENSITIVE_EXTRA_DATA_KEYS) delete extra[k];
  return [item[0], item[1], item[2], extra, item[4]];
}

export class PromptQueue {
  private pending: QueueItem[] = [];
  private readonly running = new Map<number, QueueItem>();
  private readonly history = new Map<string, HistoryEntry>();
  private taskCounter = 0;
  private waiter: (() => void) | undefined;

  /** Called on every change the engine reports with a `status` broadcast. */
  constructor(private readonly onUpdate: () => void) {}

  put(item: QueueItem): void {
    this.pending.push(item);
    this.pending.sort(compareItems);
    this.onUpdate();
    this.waiter?.();
  }

  /** Waits for the next item and marks it running. */
  async get(signal: AbortSignal): Promise<{ item: QueueItem; taskId: number } | undefined> {
    while (this.pending.length === 0) {
      if (signal.aborted) return undefined;
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
      this.waiter = undefined;
    }
    const item = this.pending.shift()!;
    const taskId = this.taskCounter++;
    this.running.set(taskId, structuredClone(item));
    this.onUpdate();
    return { item, taskId };
  }

  taskDone(taskId: number, result: Pick<HistoryEntry, 'outputs' | 'meta'>, status: HistoryStatus): void {
    const item = this.running.get(taskId);
    this.running.delete(taskId);
    if (!item) return;
    if (this.history.size > MAXIMUM_HISTORY_SIZE) this.history.delete(this.history.keys().next().value!);
    this.history.set(item[1], { prompt: stripSensitive(item), outputs: result.outputs, status, meta: result.meta });
    this.onUpdate();
  }

  remaining(): number {
    return this.pending.length + this.running.size;
  }

  runningItems(): QueueItem[] {
    return [...this.running.values()];
  }

  current(): { running: QueueItem[]; pending: QueueItem[] } {
    return { running: [...this.running.values()].map(stripSensitive), pending: this.pending.map(stripSensitive) };
  }

  wipe(): void {
    this.pending = [];
    this.onUpdate();
  }

  /** Removes the first pending item with this id (the engine's delete_queue_item). */
  delete(promptId: string): boolean {
    const idx = this.pending.findIndex((x) => x[1] === promptId);
    if (idx < 0) return false;
    // the engine wipes (one status) then reports again when it removed the last item
    if (this.pending.length === 1) this.wipe();
    else this.pending.splice(idx, 1);
    this.onUpdate();
    return true;
  }

  getHistory(opts: { promptId?: string; maxItems?: number; offset?: number }): Record<string, HistoryEntry> {
    if (opts.promptId !== undefined) {
      const h = this.history.get(opts.promptId);
      return h ? { [opts.promptId]: structuredClone(h) } : {};
    }
    const out: Record<string, HistoryEntry> = {};
    let offset = opts.offset ?? -1;
    if (offset < 0 && opts.maxItems !== undefined) offset = this.history.size - opts.maxItems;
    let i = 0;
    for (const [k, v] of this.history) {
      if (i >= offset) {
        out[k] = v;
        if (opts.maxItems !== undefined && Object.keys(out).length >= opts.maxItems) break;
      }
      i++;
    }
    return out;
  }

  wipeHistory(): void {
    this.history.clear();
  }

  deleteHistory(promptId: string): void {
    this.history.delete(promptId);
  }
}
