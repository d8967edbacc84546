import http from 'node:http';
import https from 'node:https';

// One keep-alive connection pool per process for every partner: a model call costs one request on
// a warm socket, not a TCP (and TLS) handshake.

const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

const agents = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 1024, maxFreeSockets: 256, timeout: 4_000, scheduling: 'lifo' }),
  'https:': new https.Agent({ keepAlive: true, maxSockets: 1024, maxFreeSockets: 256, timeout: 4_000, scheduling: 'lifo' }),
};

export interface UpstreamResponse {
  status: number;
  contentType: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface UpstreamRequest {
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: Buffer;
  signal: AbortSignal;
}

/** The provider could not be reached at all (nothing was sent or nothing came back). */
export class UpstreamUnreachable extends Error {}
/** The provider's deadline passed. */
export class UpstreamTimeout extends Error {}
/** The provider answered something that is not an HTTP response we can read whole. */
export class UpstreamBroken extends Error {}

/** One request, its response read whole (JSON and audio answers are small). */
export function upstreamRequest(url: string, options: UpstreamRequest): Promise<UpstreamResponse> {
  return attempt(url, options, true);
}

/** One GET whose body is handed over as a stream (result media, possibly large); follow no redirect. */
export function upstreamStream(url: string, options: { headers?: Record<string, string>; signal: AbortSignal }): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: http.IncomingMessage }> {
  return new Promise((resolve, reject) => {
    if (options.signal.aborted) return reject(new UpstreamTimeout('deadline passed before the request'));
    const target = new URL(url);
    const transport = target.protocol === 'https:' ? https : target.protocol === 'http:' ? http : null;
    if (!transport) return reject(new UpstreamBroken(`unsupported scheme ${target.protocol}`));
    const req = transport.request(target, { method: 'GET', agent: agents[target.protocol as 'http:' | 'https:'], headers: { accept: '*/*', ...options.headers } });
    const onAbort = () => req.destroy(new UpstreamTimeout('the provider did not answer in time'));
    options.signal.addEventListener('abort', onAbort, { once: true });
    req.on('error', (err: NodeJS.ErrnoException) => {
      options.signal.removeEventListener('abort', onAbort);
      reject(err instanceof UpstreamTimeout ? err : unreachable(err) ? new UpstreamUnreachable(err.code ?? err.message) : new UpstreamBroken(err.code ?? err.message));
    });
    req.on('response', (res) => {
      res.once('close', () => options.signal.removeEventListener('abort', onAbort));
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res });
    });
    req.end();
  });
}

function unreachable(err: NodeJS.ErrnoException): boolean {
  return ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'].includes(err.code ?? '');
}

function attempt(url: string, options: UpstreamRequest, mayRetry: boolean): Promise<UpstreamResponse> {
  return new Promise((resolve, reject) => {
    if (options.signal.aborted) {
      reject(new UpstreamTimeout('deadline passed before the request'));
      return;
    }
    const target = new URL(url);
    const agent = agents[target.protocol as 'http:' | 'https:'];
    const transport = target.protocol === 'https:' ? https : http;
    const headers: Record<string, string | number> = { accept: 'application/json, */*;q=0.5', ...options.headers };
    if (options.body) {
      headers['content-type'] ??= 'application/json';
      headers['content-length'] = options.body.length;
    }
    let settled = false;
    const finish = (err: Error | null, value?: UpstreamResponse) => {
      if (settled) return;
      settled = true;
      options.signal.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve(value!);
    };
    const req = transport.request(target, { method: options.method, agent, headers });
    const onAbort = () => {
      req.destroy();
      finish(new UpstreamTimeout('the provider did not answer in time'));
    };
    options.signal.addEventListener('abort', onAbort, { once: true });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (settled) return;
      // A kept-alive socket the provider closed while idle: nothing reached it, send again once.
      if (mayRetry && req.reusedSocket && err.code === 'ECONNRESET') {
        options.signal.removeEventListener('abort', onAbort);
        settled = true;
        attempt(url, options, false).then(resolve, reject);
        return;
      }
      finish(unreachable(err) ? new UpstreamUnreachable(err.code ?? err.message) : new UpstreamBroken(err.code ?? err.message));
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES) {
          req.destroy();
          finish(new UpstreamBroken('the response is larger than the router accepts'));
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', (err) => finish(new UpstreamBroken(err.message)));
      res.on('aborted', () => finish(new UpstreamBroken('the response was cut short')));
      res.on('end', () => {
        if (!res.complete) {
          finish(new UpstreamBroken('the response was cut short'));
          return;
        }
        finish(null, {
          status: res.statusCode ?? 0,
          contentType: String(res.headers['content-type'] ?? ''),
          headers: res.headers,
          body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks),
        });
      });
    });
    req.end(options.body);
  });
}

/** Parsed JSON or undefined; partners that send garbage get a provider_error, never a crash. */
export function parseJson(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}
