/**
 * The engine's log capture (app/logger.py + terminal_service.py): a ring buffer of
 * `{t, m}` entries, pushed as `logs` messages to subscribed client ids.
 */
import type { LogEntry } from '#libs/engine-protocol';
import type { WsHub } from './ws-hub.js';

const CAPACITY = 300;
export const TERMINAL_SIZE = { cols: 80, rows: 24 };

function isoLocal(d: Date): string {
  const z = (n: number, w = 2): string => String(n).padStart(w, '0');
  // Python's datetime.now().isoformat(): local time, microseconds, no zone
  return `${d.getFullYear()}-${z(d.getMonth() + 1)}-${z(d.getDate())}T${z(d.getHours())}:${z(d.getMinutes())}:${z(d.getSeconds())}.${z(d.getMilliseconds(), 3)}000`;
}

export class EngineLogs {
  private readonly entries: LogEntry[] = [];
  private unflushed: LogEntry[] = [];
  private readonly subscriptions = new Set<string>();
  private flushScheduled = false;

  constructor(
    private readonly hub: WsHub,
    private readonly echo: boolean,
  ) {}

  /** Write one line as the engine's logging would (message + newline). */
  log(message: string): void {
    this.write(message + '\n');
  }

  write(text: string): void {
    const entry = { t: isoLocal(new Date()), m: text };
    this.entries.push(entry);
    if (this.entries.length > CAPACITY) this.entries.shift();
    this.unflushed.push(entry);
    if (this.echo) process.stderr.write(text);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  all(): LogEntry[] {
    return [...this.entries];
  }

  subscribe(clientId: string): void {
    this.subscriptions.add(clientId);
  }

  unsubscribe(clientId: string): void {
    this.subscriptions.delete(clientId);
  }

  private flush(): void {
    this.flushScheduled = false;
    const entries = this.unflushed;
    this.unflushed = [];
    if (entries.length === 0) return;
    for (const clientId of [...this.subscriptions]) {
      if (!this.hub.has(clientId)) {
        // the engine drops subscriptions of sockets that went away
        this.subscriptions.delete(clientId);
        continue;
      }
      // The engine sends null when the terminal size did not change; we always send it so a
      // client that subscribed late still learns it.
      this.hub.sendJson('logs', { entries, size: TERMINAL_SIZE }, clientId);
    }
  }
}
