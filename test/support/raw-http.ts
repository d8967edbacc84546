import { request, type IncomingHttpHeaders } from 'node:http';
import { recordAnswer } from './contract.js';

export interface RawReply {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body exactly as it came over the wire (still encoded when the server compressed it). */
  bytes: Buffer;
}

/**
 * One request over node:http, which sends exactly the headers given (fetch adds its own
 * `Accept-Encoding` and decodes the answer) and may leave from a chosen loopback address.
 */
export function rawCall(url: string, init: { method?: string; headers?: Record<string, string>; body?: string | Buffer; localAddress?: string } = {}): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method ?? 'GET', headers: init.headers, localAddress: init.localAddress }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const reply = { status: res.statusCode ?? 0, headers: res.headers, bytes: Buffer.concat(chunks) };
        record(url, init.method ?? 'GET', reply);
        resolve(reply);
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** Checks the answer against the document (contract.ts); a compressed body is checked by status and headers only. */
function record(url: string, method: string, reply: RawReply): void {
  const headers = new Headers();
  for (const [k, v] of Object.entries(reply.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
  const contentType = headers.get('content-type') ?? '';
  let json: unknown;
  if (contentType.includes('json') && !headers.has('content-encoding') && reply.bytes.length > 0) {
    try {
      json = JSON.parse(reply.bytes.toString('utf8'));
    } catch {
      json = undefined;
    }
  }
  recordAnswer({ method, url, status: reply.status, headers, json, contentType, hasBody: reply.bytes.length > 0 });
}

/** The comma-separated values of a header, lower-cased, for membership checks. */
export function headerList(headers: IncomingHttpHeaders, name: string): string[] {
  const value = headers[name.toLowerCase()];
  const text = Array.isArray(value) ? value.join(',') : (value ?? '');
  return text
    .split(',')
    .map((v) => v.trim().toLowerCase())
    .filter(Boolean);
}
