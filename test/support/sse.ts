import { recordAnswer } from './contract.js';

export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/**
 * A minimal SSE client over fetch: reads frames as they arrive, records keepalive comments,
 * and can be dropped mid-stream to test resumption.
 */
export class SseClient {
  readonly events: SseEvent[] = [];
  comments = 0;
  status = 0;
  headers: Headers | null = null;
  ended: Promise<void>;
  private controller = new AbortController();
  private waiters: (() => void)[] = [];

  constructor(url: string, headers: Record<string, string>) {
    this.ended = this.run(url, headers);
  }

  private async run(url: string, headers: Record<string, string>): Promise<void> {
    let res: Response;
    try {
      res = await fetch(url, { headers, signal: this.controller.signal });
    } catch {
      return;
    }
    this.status = res.status;
    this.headers = res.headers;
    const contentType = res.headers.get('content-type') ?? '';
    if (!res.body || res.status !== 200) {
      const text = await res.text().catch(() => '');
      recordAnswer({ method: 'GET', url, status: res.status, headers: res.headers, json: contentType.includes('json') && text ? JSON.parse(text) : undefined, contentType, hasBody: text.length > 0 });
      this.events.push({ id: null, event: 'http_error', data: text });
      this.notify();
      return;
    }
    recordAnswer({ method: 'GET', url, status: res.status, headers: res.headers, contentType, hasBody: true });
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          this.parse(frame);
        }
      }
    } catch {
      // aborted
    }
    this.notify();
  }

  private parse(frame: string): void {
    const e: SseEvent = { id: null, event: 'message', data: '' };
    let isComment = true;
    for (const line of frame.split('\n')) {
      if (line.startsWith(':')) continue;
      isComment = false;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') e.id = value;
      else if (field === 'event') e.event = value;
      else if (field === 'data') e.data += (e.data ? '\n' : '') + value;
    }
    if (isComment) this.comments++;
    else this.events.push(e);
    this.notify();
  }

  private notify(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Resolves when `check` holds on the events so far. */
  async until(check: (events: SseEvent[]) => boolean, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check(this.events)) {
      if (Date.now() > deadline) throw new Error(`SSE condition not met; got ${this.events.map((e) => e.event).join(',')}`);
      await Promise.race([new Promise<void>((r) => this.waiters.push(r)), new Promise((r) => setTimeout(r, 200)), this.ended]);
    }
  }

  lastId(): string | null {
    for (let i = this.events.length - 1; i >= 0; i--) if (this.events[i]!.id) return this.events[i]!.id;
    return null;
  }

  close(): void {
    this.controller.abort();
  }
}

export function statusesOf(events: SseEvent[]): string[] {
  return events.filter((e) => e.event === 'status').map((e) => (JSON.parse(e.data) as { status: string }).status);
}
