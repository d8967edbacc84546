import { request, type IncomingHttpHeaders } from 'node:http';

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
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(init.body);
  });
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
