import { request } from 'node:http';
import net from 'node:net';
import fc from 'fast-check';

// Shared by the hostile-input and hostile-connections suites: a raw HTTP client that sends what a
// browser or fetch would refuse to, a tally of what came back, and a fast-check runner that
// records its observations before it asserts.

/** Fixed so a run is repeatable; set FUZZ_SEED to explore other inputs. */
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 20261122);

/**
 * Characters for generated strings: mostly printable ASCII, plus any UTF-16 code unit (lone
 * surrogates included, which JSON can carry as escapes) and the usual troublemakers.
 */
export const hostileChar = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  fc.constantFrom('\u0000', '\ud800', '\udfff', '\r\n', '..', '/', '\\', '%', '"', '😀'),
);
export const hostileText = (maxLength = 40) => fc.string({ unit: hostileChar, maxLength });
export const hostileJson = (maxDepth = 3) => fc.jsonValue({ maxDepth, stringUnit: hostileChar });

/**
 * Percent-encodes any JS string for a URL, lone surrogates included: those become the bytes
 * WTF-8 would give them (`%ED%A0%80`), which are not valid UTF-8 and so a test of the decoder.
 */
export function encodeAny(text: string): string {
  let out = '';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (code >= 0xd800 && code <= 0xdfff) {
      out += [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    } else {
      out += encodeURIComponent(ch);
    }
  }
  return out;
}

/** Any single request slower than this counts as a failure (generous: two cores, other suites). */
export const MAX_MS = 5_000;

export interface Answer {
  status: number;
  ms: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: any;
}

/**
 * One request over node:http: any method, any path bytes it accepts, headers as given (no
 * normalisation beyond what Node enforces). A request with no answer within `timeoutMs` rejects.
 */
export function send(
  url: string,
  opts: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer; timeoutMs?: number } = {},
): Promise<Answer> {
  const target = new URL(url);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = request(
      { host: target.hostname, port: target.port, method: opts.method ?? 'GET', path: opts.path ?? `${target.pathname}${target.search}`, headers: opts.headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: any = text;
          if (/json/.test(String(res.headers['content-type'] ?? '')) && text) {
            try {
              body = JSON.parse(text);
            } catch {
              body = text;
            }
          }
          resolve({ status: res.statusCode ?? 0, ms: Date.now() - started, headers: res.headers, text, body });
        });
        res.on('error', reject);
      },
    );
    req.setTimeout(opts.timeoutMs ?? 15_000, () => req.destroy(new Error(`no answer within ${opts.timeoutMs ?? 15_000} ms`)));
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** The contract's ErrorEnvelope: `{error: {code, message, details?}}`; a reason when it is not one. */
export function notEnvelope(a: Answer): string | null {
  const e = (a.body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (!/^application\/json/.test(String(a.headers['content-type'] ?? ''))) return `content-type ${String(a.headers['content-type'])}`;
  if (!e || typeof e.code !== 'string' || typeof e.message !== 'string') return `not an ErrorEnvelope: ${a.text.slice(0, 200)}`;
  return null;
}

/** The engine's own 400 body that v1 answers bad prompts with: `{error: {type, message, details, extra_info}, node_errors}`. */
export function notEngineError(a: Answer): string | null {
  const b = a.body as { error?: Record<string, unknown>; node_errors?: unknown } | null;
  const e = b?.error;
  if (!e || typeof e.type !== 'string' || typeof e.message !== 'string' || typeof e.details !== 'string' || typeof b.node_errors !== 'object') {
    return `not the engine's error shape: ${a.text.slice(0, 200)}`;
  }
  return null;
}

/** The router's errors: `{detail, error_type}`, or the 422 `{detail: [...]}`, with X-Service-Error-Type. */
export function notRouterError(a: Answer): string | null {
  const b = a.body as { detail?: unknown; error_type?: unknown } | null;
  if (typeof a.headers['x-service-error-type'] !== 'string') return 'no X-Service-Error-Type header';
  if (a.status === 422 && Array.isArray(b?.detail)) return null;
  if (!b || typeof b.detail !== 'string' || typeof b.error_type !== 'string') return `not a router error: ${a.text.slice(0, 200)}`;
  return null;
}

/** What a run saw: how many answers of each status, and the slowest. */
export class Tally {
  count = 0;
  maxMs = 0;
  private readonly statuses = new Map<number, number>();

  add(a: Answer): void {
    this.count++;
    this.maxMs = Math.max(this.maxMs, a.ms);
    this.statuses.set(a.status, (this.statuses.get(a.status) ?? 0) + 1);
  }

  get only4xx(): boolean {
    return [...this.statuses.keys()].every((s) => s >= 400 && s < 500);
  }

  summary(): string {
    const parts = [...this.statuses.entries()].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${n}× ${s}`);
    return `${parts.join(', ')}; slowest ${this.maxMs} ms`;
  }
}

/** Problems every answer is checked for, whatever the route: a 5xx, or slower than MAX_MS. */
export function baseProblem(a: Answer): string | null {
  if (a.status >= 500) return `answered ${a.status}: ${a.text.slice(0, 300)}`;
  if (a.ms > MAX_MS) return `took ${a.ms} ms`;
  return null;
}

export interface Row {
  tried: string;
  count: number;
  outcome: string;
  held: boolean;
}

/**
 * Runs a property over `runs` generated inputs: each is sent, tallied, and judged by `judge`
 * (a reason string fails it). The row goes to `record` before anything is asserted.
 */
export async function fuzz<T>(
  record: (row: Row) => void,
  tried: string,
  arb: fc.Arbitrary<T>,
  sendOne: (value: T) => Promise<Answer>,
  judge: (a: Answer, value: T) => string | null,
  runs = 100,
): Promise<void> {
  const tally = new Tally();
  const details = await fc.check(
    fc.asyncProperty(arb, async (value) => {
      const a = await sendOne(value);
      tally.add(a);
      const problem = baseProblem(a) ?? judge(a, value);
      if (problem) throw new Error(problem);
    }),
    { numRuns: runs, interruptAfterTimeLimit: 120_000, markInterruptAsFailure: true, seed: FUZZ_SEED },
  );
  const held = !details.failed;
  const failure = details.failed ? `; FAILED (seed ${FUZZ_SEED}) on ${fc.stringify(details.counterexample)}: ${String((details.errorInstance as Error | undefined)?.message ?? '').slice(0, 200)}` : '';
  record({ tried, count: tally.count, outcome: `${tally.summary()}${failure}`, held });
  expect(details.failed ? `${fc.defaultReportMessage(details)}\n${String(details.errorInstance)}` : null).toBeNull();
}

/** Runs fixed cases through the same judging and recording as `fuzz`. */
export async function cases<T>(
  record: (row: Row) => void,
  tried: string,
  values: T[],
  sendOne: (value: T) => Promise<Answer>,
  judge: (a: Answer, value: T) => string | null,
): Promise<void> {
  const tally = new Tally();
  const failures: string[] = [];
  for (const value of values) {
    let a: Answer;
    try {
      a = await sendOne(value);
    } catch (err) {
      failures.push(`${JSON.stringify(value).slice(0, 80)}: ${(err as Error).message}`);
      continue;
    }
    tally.add(a);
    const problem = baseProblem(a) ?? judge(a, value);
    if (problem) failures.push(`${JSON.stringify(value).slice(0, 80)}: ${problem}`);
  }
  record({ tried, count: values.length, outcome: `${tally.summary()}${failures.length ? `; FAILED ${failures.length}: ${failures[0]}` : ''}`, held: failures.length === 0 });
  expect(failures).toEqual([]);
}

/** A raw TCP exchange: writes `chunks` (spaced by `gapMs`), returns everything read until the server closes. */
export function rawExchange(
  port: number,
  chunks: Array<string | Buffer>,
  opts: { gapMs?: number; giveUpMs?: number } = {},
): Promise<{ text: string; ms: number; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    let next = 0;
    let closedByServer = true;
    const writer = setInterval(() => {
      if (next < chunks.length && socket.writable) socket.write(chunks[next++]!);
    }, opts.gapMs ?? 0);
    const giveUp = setTimeout(() => {
      closedByServer = false;
      socket.destroy();
    }, opts.giveUpMs ?? 15_000);
    socket.on('data', (d: Buffer) => received.push(d));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(writer);
      clearTimeout(giveUp);
      resolve({ text: Buffer.concat(received).toString('latin1'), ms: Date.now() - started, closedByServer });
    });
  });
}

/** Status and parsed body of the first HTTP response in raw bytes. */
export function parseRawResponse(text: string): { status: number; head: string; body: any } {
  const end = text.indexOf('\r\n\r\n');
  const head = end >= 0 ? text.slice(0, end) : text;
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  let body: any = end >= 0 ? text.slice(end + 4) : '';
  try {
    body = JSON.parse(body as string);
  } catch {
    // not JSON
  }
  return { status, head, body };
}

/** Lines the process logged at error level since `from`: pino's level 50 and up, or Nest's ERROR. */
export function errorLines(output: string[], from = 0): string[] {
  return output.slice(from).filter((l) => /"level":(5\d|60)\b|\sERROR\s/.test(l));
}
