import type { WebSocket } from 'ws';
import { MAX_BUFFERED_BYTES, PREVIEW_DROP_BYTES } from '../../jobs/slow-readers.js';
const INCOMING_PER_10S = 200;

/** One client's WebSocket, with the flags it declared and a bound on the memory it may hold. */
export class ClientSocket {
  supportsPreviewMetadata = false;
  alive = true;
  private closing = false;
  private incoming = 0;
  private windowStart = Date.now();

  constructor(
    readonly ws: WebSocket,
    readonly sid: string,
  ) {}

  sendText(text: string): void {
    if (!this.writable()) return;
    if (this.ws.bufferedAmount > MAX_BUFFERED_BYTES) return this.shed();
    this.ws.send(text);
  }

  sendJson(type: string, data: unknown): void {
    this.sendText(JSON.stringify({ type, data }));
  }

  /** A preview or progress-text frame: dropped, not queued, behind a client that reads slowly. */
  sendExpendable(frame: Buffer): void {
    if (!this.writable()) return;
    if (this.ws.bufferedAmount > MAX_BUFFERED_BYTES) return this.shed();
    if (this.ws.bufferedAmount > PREVIEW_DROP_BYTES) return;
    this.ws.send(frame, { binary: true });
  }

  /** Counts an incoming message; false when the client floods (then it is closed). */
  countIncoming(): boolean {
    const now = Date.now();
    if (now - this.windowStart > 10_000) {
      this.windowStart = now;
      this.incoming = 0;
    }
    if (++this.incoming <= INCOMING_PER_10S) return true;
    this.close(1008, 'too many messages');
    return false;
  }

  close(code: number, reason: string): void {
    if (this.closing) return;
    this.closing = true;
    this.ws.close(code, reason);
    // A client that does not read will not read the close frame either.
    setTimeout(() => this.ws.terminate(), 5_000).unref();
  }

  private writable(): boolean {
    return !this.closing && this.ws.readyState === this.ws.OPEN;
  }

  private shed(): void {
    this.close(1008, 'client is not reading its messages');
  }
}
