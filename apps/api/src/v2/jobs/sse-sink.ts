import type { ServerResponse } from 'node:http';
import { MAX_BUFFERED_BYTES, PREVIEW_DROP_BYTES } from '../../jobs/slow-readers.js';

/** What one write to an event stream did. */
export type SinkOutcome = 'sent' | 'dropped' | 'closed';

/**
 * The write side of one event stream, bounded like the v1 WebSocket: while more than
 * PREVIEW_DROP_BYTES wait unsent, previews are skipped; past MAX_BUFFERED_BYTES the connection is
 * closed. Nothing else is lost: the client resumes with Last-Event-ID once it reads again.
 *
 * Custom on purpose: an SSE plugin writes the events it is given, while which events a reader that
 * falls behind may miss, and when to give up on it, is this product's rule (the v1 WebSocket's
 * too), safe only because every event stays in the job's log to resume from.
 */
export class SseSink {
  constructor(private readonly raw: Pick<ServerResponse, 'write' | 'destroy' | 'writableLength' | 'destroyed'>) {}

  write(text: string, expendable = false): SinkOutcome {
    if (this.raw.destroyed) return 'closed';
    const unsent = this.raw.writableLength;
    if (unsent > MAX_BUFFERED_BYTES) {
      this.raw.destroy();
      return 'closed';
    }
    if (expendable && unsent > PREVIEW_DROP_BYTES) return 'dropped';
    this.raw.write(text);
    return 'sent';
  }
}
