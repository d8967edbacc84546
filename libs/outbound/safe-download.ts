import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import { RequestFilteringHttpAgent, RequestFilteringHttpsAgent } from 'request-filtering-agent';

export interface OutboundPolicy {
  /** Loopback targets are reachable (tests, `npm start`); private, link-local and metadata ones never. */
  allowLoopback: boolean;
  /** Plain http is refused (production). */
  requireHttps: boolean;
}

export type OutboundFailure = 'scheme' | 'blocked_address' | 'http_status' | 'redirects' | 'timeout' | 'too_large' | 'network';

export class OutboundError extends Error {
  constructor(
    readonly reason: OutboundFailure,
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface Download {
  body: Readable;
  /** What the server declared; the body is still counted as it streams. */
  contentLength: number | null;
  contentType: string | null;
  /** The URL that answered, after redirects. */
  url: URL;
}

const MAX_REDIRECTS = 3;

/**
 * Loopback addresses a URL may reach when the policy allows loopback: only when it names a
 * loopback host itself (`127.x.x.x`, `[::1]`, `localhost`); a name that merely resolves there is
 * refused like any other private target. (Each family's range is listed only for hosts of that
 * family: the library warns when it compares an address with a range of the other family.)
 */
function loopbackAllowed(url: URL, policy: OutboundPolicy): string[] {
  if (!policy.allowLoopback) return [];
  const host = url.hostname;
  if (host === 'localhost') return ['::1', '127.0.0.0/8'];
  if (host === '[::1]') return ['::1'];
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)) return ['127.0.0.0/8'];
  return [];
}

/** An agent for one request to `url` under the policy (imports by URL, webhook deliveries). */
export function outboundAgent(url: URL, policy: OutboundPolicy): http.Agent {
  // The address is checked once the name is looked up, on the socket that connects to it: a name
  // that resolves to a private address (DNS rebinding included) is refused at connect time.
  const options = { allowIPAddressList: loopbackAllowed(url, policy), keepAlive: false };
  return url.protocol === 'https:' ? new RequestFilteringHttpsAgent(options) : new RequestFilteringHttpAgent(options);
}

function checkUrl(url: URL, policy: OutboundPolicy): void {
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && !policy.requireHttps)) {
    throw new OutboundError('scheme', policy.requireHttps ? 'Only https URLs are fetched.' : 'Only http and https URLs are fetched.');
  }
  if (url.username || url.password) throw new OutboundError('scheme', 'URLs with credentials are not fetched.');
}

function get(url: URL, agent: http.Agent, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? https : http).get(url, { agent, signal, headers: { 'user-agent': 'comfy-cloud-import/1', accept: '*/*' } }, resolve);
    request.on('error', reject);
  });
}

/** Whether a request failed because its target's address is outside the policy (the agent's refusal). */
export function isBlockedAddress(err: unknown): boolean {
  return /is not allowed/i.test((err as Error)?.message ?? '');
}

function failure(err: unknown, signal: AbortSignal): OutboundError {
  if (err instanceof OutboundError) return err;
  const message = (err as Error).message ?? String(err);
  if (isBlockedAddress(err)) return new OutboundError('blocked_address', 'The URL leads to an address the service does not fetch from (a private, loopback or reserved one).');
  if (signal.aborted) return new OutboundError('timeout', 'The download took longer than allowed.');
  return new OutboundError('network', `The URL could not be fetched: ${message.slice(0, 200)}`);
}

/**
 * Opens a download from a URL a tenant gave, with the outbound rules of the service: http(s)
 * only, no target in a private, loopback (unless allowed), link-local or reserved range, checked
 * for every connection (redirects too, at most three), a size cap checked against the declared
 * length before any byte is read (the stream itself is counted by whoever stores it), and one
 * deadline for the whole transfer (`signal`).
 */
export async function openDownload(raw: string, policy: OutboundPolicy, limits: { maxBytes: number; signal: AbortSignal }): Promise<Download> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundError('scheme', 'url must be an absolute http(s) URL.');
  }
  try {
    for (let hop = 0; ; hop++) {
      checkUrl(url, policy);
      const response = await get(url, outboundAgent(url, policy), limits.signal);
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400 && response.headers.location) {
        response.resume();
        if (hop >= MAX_REDIRECTS) throw new OutboundError('redirects', `The URL redirected more than ${MAX_REDIRECTS} times.`);
        url = new URL(response.headers.location, url);
        continue;
      }
      if (status < 200 || status >= 300) {
        response.resume();
        throw new OutboundError('http_status', `The URL answered ${status}.`, status);
      }
      const declared = response.headers['content-length'] === undefined ? null : Number(response.headers['content-length']);
      if (declared !== null && declared > limits.maxBytes) {
        response.destroy();
        throw new OutboundError('too_large', `The file is larger than the limit of ${limits.maxBytes} bytes.`);
      }
      response.on('error', () => undefined);
      return { body: response, contentLength: Number.isFinite(declared) ? declared : null, contentType: response.headers['content-type'] ?? null, url };
    }
  } catch (err) {
    throw failure(err, limits.signal);
  }
}
