/** Keeps the tail of what the engine logged during one job, within a byte budget. */
export class LogCapture {
  private parts: string[] = [];
  private bytes = 0;
  private dropped = false;
  private seen = false;

  constructor(private readonly maxBytes: number) {}

  add(text: string): void {
    if (!text) return;
    this.seen = true;
    this.parts.push(text);
    this.bytes += Buffer.byteLength(text);
    while (this.bytes > this.maxBytes && this.parts.length > 0) {
      const first = this.parts[0]!;
      const excess = this.bytes - this.maxBytes;
      const firstBytes = Buffer.byteLength(first);
      if (firstBytes <= excess) {
        this.parts.shift();
        this.bytes -= firstBytes;
      } else {
        const kept = Buffer.from(first).subarray(excess).toString('utf8');
        this.parts[0] = kept;
        this.bytes -= firstBytes - Buffer.byteLength(kept);
      }
      this.dropped = true;
    }
  }

  /** Null when nothing was captured. */
  result(): { text: string; truncated: boolean } | null {
    if (!this.seen) return null;
    return { text: this.parts.join(''), truncated: this.dropped };
  }
}
