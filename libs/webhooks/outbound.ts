import http from 'node:http';
import https from 'node:https';
import { isBlockedAddress, outboundAgent, type OutboundPolicy } from '#libs/outbound';
import { hostRefusal } from './address-policy.js';
import { classifyStatus, type AttemptResult } from './schedule.js';

// One webhook POST, with the service's outbound rules (libs/outbound): every connection goes
// through its filtering agent, which checks the address the socket connects to when it connects,
// so a tenant's URL cannot reach the service's own network (loopback, private, link-local and
// metadata addresses), DNS rebinding included. Redirects are not followed (Node's client never
// follows them, and a 3xx is a final answer here); at most `maxResponseBytes` of the answer are
// read; the whole attempt is bounded by `timeoutMs`.

export interface OutboundOptions {
  policy: OutboundPolicy;
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

export function postWebhook(url: string, headers: Record<string, string>, body: string, options: OutboundOptions): Promise<AttemptOutcome> {
  const target = new URL(url);
  const refused = hostRefusal(target.hostname, options.policy);
  if (refused) return Promise.resolve({ result: { kind: 'blocked_address', message: refused }, latencyMs: null, excerpt: '' });
  return new Promise((resolve) => {
    const started = performance.now();
    let settled = false;
    const finish = (outcome: AttemptOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const req = (target.protocol === 'https:' ? https : http).request(target, {
      method: 'POST',
      agent: outboundAgent(target, options.policy),
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'comfy-cloud-webhooks/1' },
    });
    const timer = setTimeout(() => {
      finish({ result: { kind: 'timeout' }, latencyMs: null, excerpt: '' });
      req.destroy();
    }, options.timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => {
      const result: AttemptResult = isBlockedAddress(err)
        ? { kind: 'blocked_address', message: `${target.hostname} resolves to an address that is not public` }
        : { kind: 'connection_error', message: err.code ?? err.message };
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
