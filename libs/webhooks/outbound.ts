import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { AddressPolicy } from './address-policy.js';
import { classifyStatus, type AttemptResult } from './schedule.js';

// One webhook POST, made so that a tenant's URL cannot turn the service against its own network:
// every address a connection is made to is checked at connect time (the lookup the socket itself
// uses, so a name that resolves to a public address for a check and to a private one for the
// connection, DNS rebinding, gets nowhere); redirects are not followed (Node's client never
// follows them, and a 3xx is a final answer here); at most `maxResponseBytes` of the answer are
// read; the whole attempt is bounded by `timeoutMs`.

export interface OutboundOptions {
  policy: AddressPolicy;
  timeoutMs: number;
  maxResponseBytes: number;
}

export interface AttemptOutcome {
  result: AttemptResult;
  /** From sending to the answer's headers; null without an answer. */
  latencyMs: number | null;
  /** The start of the answer, for the delivery's record (failures only). */
  excerpt: string;
}

class BlockedAddressError extends Error {
  readonly code = 'EWEBHOOKBLOCKED';
}

/** dns.lookup, refusing the whole name when any address it resolves to is outside the policy. */
function guardedLookup(policy: AddressPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const refused = addresses.map((a) => policy.refusal(a.address)).find((r) => r !== null);
      if (refused || addresses.length === 0) return callback(new BlockedAddressError(`${hostname}: ${refused ?? 'it resolves to no address'}`), '', 0);
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

// Connections are kept open between attempts to the same receiver; each was checked when made.
const agents = { 'http:': new http.Agent({ keepAlive: true, maxSockets: 32 }), 'https:': new https.Agent({ keepAlive: true, maxSockets: 32 }) };

export function postWebhook(url: string, headers: Record<string, string>, body: string, options: OutboundOptions): Promise<AttemptOutcome> {
  const target = new URL(url);
  const literal = options.policy.hostRefusal(target.hostname);
  if (literal) return Promise.resolve({ result: { kind: 'blocked_address', message: literal }, latencyMs: null, excerpt: '' });
  const protocol = target.protocol === 'https:' ? 'https:' : 'http:';
  const client = protocol === 'https:' ? https : http;
  return new Promise((resolve) => {
    const started = performance.now();
    let settled = false;
    const finish = (outcome: AttemptOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const req = client.request(target, {
      method: 'POST',
      agent: agents[protocol],
      lookup: guardedLookup(options.policy),
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'comfy-cloud-webhooks/1' },
    });
    const timer = setTimeout(() => {
      finish({ result: { kind: 'timeout' }, latencyMs: null, excerpt: '' });
      req.destroy();
    }, options.timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => {
      const result: AttemptResult = err instanceof BlockedAddressError ? { kind: 'blocked_address', message: err.message } : { kind: 'connection_error', message: err.code ?? err.message };
      finish({ result, latencyMs: null, excerpt: '' });
    });
    req.on('response', (res) => {
      const latencyMs = Math.round(performance.now() - started);
      const status = res.statusCode ?? 0;
      const retryAfter = typeof res.headers['retry-after'] === 'string' ? res.headers['retry-after'] : undefined;
      const chunks: Buffer[] = [];
      let kept = 0;
      const done = () => finish({ result: classifyStatus(status, retryAfter), latencyMs, excerpt: Buffer.concat(chunks).toString('utf8') });
      res.on('data', (chunk: Buffer) => {
        if (kept < options.maxResponseBytes) chunks.push(chunk.subarray(0, options.maxResponseBytes - kept));
        kept += chunk.length;
        // Past the cap the rest is not read: the connection is dropped instead.
        if (kept >= options.maxResponseBytes) {
          done();
          res.destroy();
        }
      });
      res.on('end', done);
      res.on('error', done);
      res.on('close', done);
    });
    req.end(body);
  });
}
