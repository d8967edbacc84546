/**
 * Runs the latest call at most once per interval, the last one never lost. The first runs at once,
 * or (`fromStart`) only once an interval has passed since the throttle was made.
 */
export class Throttle {
  private last: number;
  private pending: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly intervalMs: number,
    options: { fromStart?: boolean } = {},
  ) {
    this.last = options.fromStart ? Date.now() : 0;
  }

  run(fn: () => void): void {
    const wait = this.last + this.intervalMs - Date.now();
    if (wait <= 0 && !this.timer) {
      this.last = Date.now();
      fn();
      return;
    }
    this.pending = fn;
    this.timer ??= setTimeout(() => {
      this.timer = null;
      const next = this.pending;
      this.pending = null;
      if (next) {
        this.last = Date.now();
        next();
      }
    }, Math.max(0, wait));
  }

  /** Runs the call still waiting for its turn, now; nothing is left to run later. */
  flush(): void {
    const next = this.pending;
    this.cancel();
    if (next) {
      this.last = Date.now();
      next();
    }
  }

  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.pending = null;
  }
}
