import type { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';

/**
 * Reads a body to its end and drops it. When the store refuses an upload, the client is still
 * sending: answering before its body is read would leave the request half-read on the
 * connection, and closing the connection on unread bytes resets it, so the client would see a
 * connection error instead of the answer.
 */
export async function drain(body: Readable): Promise<void> {
  body.resume();
  await finished(body).catch(() => undefined);
}
