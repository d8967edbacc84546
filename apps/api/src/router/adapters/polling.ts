import { setTimeout as sleep } from 'node:timers/promises';
import type { GenerationResult } from './adapter.js';
import { providerTimeout } from './outcomes.js';
import type { UpstreamResponse } from './upstream-http.js';

// Submit-then-poll: the router holds the caller's connection and asks the provider about the
// generation until it ends. A poll that fails in passing (a 429, a 5xx, a dropped connection)
// does not lose the generation: the next one asks again, until the provider's deadline.

const TRANSIENT = new Set([429, 500, 502, 503, 504]);

export interface PollLoop {
  intervalMs: number;
  signal: AbortSignal;
  /** Ask at once (a retry collecting a generation that has had time to end), or wait an interval first. */
  waitFirst: boolean;
  ask(): Promise<UpstreamResponse>;
  /** The generation's end, or null while it still runs. Not called for transient failures. */
  settle(res: UpstreamResponse): GenerationResult | null | Promise<GenerationResult | null>;
}

export async function pollUntilSettled(loop: PollLoop): Promise<GenerationResult> {
  for (let wait = loop.waitFirst; ; wait = true) {
    try {
      if (wait) await sleep(loop.intervalMs, undefined, { signal: loop.signal });
    } catch {
      return providerTimeout();
    }
    let res: UpstreamResponse;
    try {
      res = await loop.ask();
    } catch {
      if (loop.signal.aborted) return providerTimeout();
      continue; // one lost poll does not lose the generation
    }
    if (TRANSIENT.has(res.status)) continue;
    const settled = await loop.settle(res);
    if (settled) return settled;
  }
}
