import { z } from 'zod';
import { ERROR_STATUS, ErrorEnvelopeSchema, ROUTER_BUCKET_STATUS, RouterErrorResponseSchema, RouterErrorTypeSchema, type ErrorCode, type RouterBucket } from '#libs/contracts';

// One operation of the API as its table declares it: the schemas of what it takes (path, query,
// headers, body) and of every answer, by status, with the headers that answer carries. The OpenAPI
// document is generated from these tables (document.ts), the request schemas validate requests
// (validate.ts), and the e2e suites check every real answer against the document.

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete' | 'head';

export interface HeaderSpec {
  schema: z.ZodType;
  description?: string;
  /** The answer always carries it (the e2e validation checks that it does). */
  required?: boolean;
}

export interface ResponseSpec {
  description: string;
  headers?: Record<string, HeaderSpec>;
  /** Media type to body schema; `null` for a body the document does not describe (bytes). */
  content?: Record<string, z.ZodType | null>;
  examples?: Record<string, unknown>;
}

export interface Operation {
  method: Method;
  /** OpenAPI template, relative to the mount prefix: `/api/v2/jobs/{id}`. */
  path: string;
  tag: string;
  summary: string;
  description?: string;
  security: Record<string, string[]>[];
  params?: z.ZodObject;
  query?: z.ZodObject;
  /** Request headers, by their canonical name. */
  headers?: Record<string, HeaderSpec>;
  body?: { content: Record<string, z.ZodType>; required: boolean };
  responses: Record<number, ResponseSpec>;
  /** Extensions (`x-websocket`). */
  extra?: Record<string, unknown>;
}

export const RETRY_AFTER: Record<string, HeaderSpec> = { 'Retry-After': { description: 'Seconds to wait before retrying.', schema: z.int().min(1) } };

const list = (codes: readonly string[]) => codes.map((c) => `\`${c}\``).join(', ');

function groupByStatus<C extends string>(codes: readonly C[], statusOf: (c: C) => number): [number, C[]][] {
  const byStatus = new Map<number, C[]>();
  for (const code of codes) byStatus.set(statusOf(code), [...(byStatus.get(statusOf(code)) ?? []), code]);
  return [...byStatus].sort((a, b) => a[0] - b[0]);
}

/** ErrorEnvelope answers for these codes, one per status, each naming its codes. */
export function envelopeErrors(codes: readonly ErrorCode[]): Record<number, ResponseSpec> {
  const out: Record<number, ResponseSpec> = {};
  for (const [status, group] of groupByStatus(codes, (c) => ERROR_STATUS[c])) {
    out[status] = {
      description: `ErrorEnvelope with \`error.code\` ${list(group)}.`,
      ...(status === 429 || status === 503 ? { headers: RETRY_AFTER } : {}),
      content: { 'application/json': ErrorEnvelopeSchema },
      examples: Object.fromEntries(group.map((code) => [code, { error: { code, message: '…' } }])),
    };
  }
  return out;
}

export const SERVICE_REQUEST_ID: Record<string, HeaderSpec> = {
  'X-Service-Request-Id': { description: 'Server-generated id of the call; on every response.', schema: z.string(), required: true },
};

const ERROR_TYPE_HEADER: Record<string, HeaderSpec> = {
  'X-Service-Error-Type': { description: 'The bucket; same as `error_type` in the body (the only bucket on 422).', schema: RouterErrorTypeSchema, required: true },
};

/** RouterErrorResponse answers for these buckets, one per status. */
export function routerErrors(buckets: readonly RouterBucket[], extraHeaders: Record<number, Record<string, HeaderSpec>> = {}): Record<number, ResponseSpec> {
  const out: Record<number, ResponseSpec> = {};
  for (const [status, group] of groupByStatus(buckets, (b) => ROUTER_BUCKET_STATUS[b])) {
    out[status] = {
      description: `RouterErrorResponse with \`error_type\` ${list(group)}.`,
      headers: { ...SERVICE_REQUEST_ID, ...ERROR_TYPE_HEADER, ...(status === 429 ? RETRY_AFTER : {}), ...(extraHeaders[status] ?? {}) },
      content: { 'application/json': RouterErrorResponseSchema },
      examples: Object.fromEntries(group.map((b) => [b, { detail: '…', error_type: b }])),
    };
  }
  return out;
}

export const json = (schema: z.ZodType, description: string, headers?: Record<string, HeaderSpec>): ResponseSpec => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/json': schema },
});

export const jsonBody = (schema: z.ZodType, required = true) => ({ content: { 'application/json': schema }, required });
export const BYTES = z.string().meta({ contentMediaType: 'application/octet-stream' });
export const bytes = (description: string, mediaType = 'application/octet-stream'): ResponseSpec => ({ description, content: { [mediaType]: BYTES } });
export const noBody = (description: string, headers?: Record<string, HeaderSpec>): ResponseSpec => ({ description, ...(headers ? { headers } : {}) });
