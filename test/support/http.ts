import { request } from 'node:http';
import { recordAnswer } from './contract.js';

/** Small fetch helpers for tests: every call returns status, headers and the parsed body. */
export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export async function call<T = any>(url: string, init: RequestInit = {}): Promise<Reply<T>> {
  const res = await fetch(url, { redirect: 'manual', ...init });
  const text = await res.text();
  let body: any = text;
  const contentType = res.headers.get('content-type') ?? '';
  if (contentType.includes('json') && text) body = JSON.parse(text);
  recordAnswer({ method: init.method ?? 'GET', url, status: res.status, headers: res.headers, json: contentType.includes('json') && text ? body : undefined, contentType, hasBody: text.length > 0 });
  return { status: res.status, headers: res.headers, body, text };
}

export function bearer(key: string, extra: Record<string, string> = {}): Record<string, string> {
  return { authorization: `Bearer ${key}`, ...extra };
}

export function jsonInit(method: string, body: unknown, headers: Record<string, string> = {}): RequestInit {
  return { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) };
}

export function uploadForm(bytes: Uint8Array, fileName: string, fields: Record<string, string | string[]> = {}): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) {
    for (const v of Array.isArray(value) ? value : [value]) form.append(name, v);
  }
  form.append('file', new Blob([bytes]), fileName);
  return form;
}

/** Asserts the contract's ErrorEnvelope and returns its code. */
export function envelopeCode(reply: Reply): string {
  const b = reply.body as { error?: { code?: unknown; message?: unknown } };
  if (!b || typeof b !== 'object' || !b.error || typeof b.error.code !== 'string' || typeof b.error.message !== 'string') {
    throw new Error(`not an ErrorEnvelope (status ${reply.status}): ${reply.text.slice(0, 300)}`);
  }
  return b.error.code;
}

/** A request with a chosen Host header (fetch may not set Host), for host-based routing. */
export function callWithHost<T = any>(url: string, host: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Reply<T>> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method ?? 'GET', headers: { ...init.headers, host } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
        let body: any = text;
        const contentType = res.headers['content-type'] ?? '';
        if (contentType.includes('json') && text) body = JSON.parse(text);
        recordAnswer({ method: init.method ?? 'GET', url, status: res.statusCode ?? 0, headers, json: contentType.includes('json') && text ? body : undefined, contentType, hasBody: text.length > 0 });
        resolve({ status: res.statusCode ?? 0, headers, body, text });
      });
    });
    req.on('error', reject);
    req.end(init.body);
  });
}
