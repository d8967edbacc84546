import { ERROR_STATUS, type ErrorCode } from '#libs/contracts';
import { ROUTER_BUCKET_STATUS } from '#libs/contracts';
import { ROUTER_ERROR_TYPES, ref } from './schemas.js';

// Builders for response objects, shared by the decorators (v2) and the hand-written path tables
// (v1, router), so every error response names the codes it can carry the same way.

type Obj = Record<string, unknown>;

export const RETRY_AFTER = { 'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 1 } } };

const list = (codes: readonly string[]) => codes.map((c) => `\`${c}\``).join(', ');

/** ErrorEnvelope responses for these codes, one per status, each naming its codes. */
export function envelopeResponses(codes: readonly ErrorCode[]): Record<string, Obj> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code]);
  const out: Record<string, Obj> = {};
  for (const [status, group] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    out[String(status)] = {
      description: `ErrorEnvelope with \`error.code\` ${list(group)}.`,
      ...(status === 429 || status === 503 ? { headers: RETRY_AFTER } : {}),
      content: { 'application/json': { schema: ref('ErrorEnvelope'), examples: Object.fromEntries(group.map((code) => [code, { value: { error: { code, message: '…' } } }])) } },
    };
  }
  return out;
}

/** Codes every authenticated route of v2 can answer. */
export const V2_COMMON: ErrorCode[] = ['unauthorized', 'forbidden', 'rate_limited', 'upstream_error', 'service_unavailable'];

export { ROUTER_BUCKET_STATUS };

export const SERVICE_HEADERS = {
  'X-Service-Request-Id': { description: 'Server-generated id of the call; on every response.', schema: { type: 'string' } },
};

const ERROR_TYPE_HEADER = {
  'X-Service-Error-Type': { description: 'The bucket; same as `error_type` in the body (the only bucket on 422).', schema: ref('RouterErrorType') },
};

/** RouterErrorResponse responses for these buckets, one per status. */
export function routerErrorResponses(buckets: readonly (typeof ROUTER_ERROR_TYPES)[number][], extraHeaders: Record<number, Obj> = {}): Record<string, Obj> {
  const byStatus = new Map<number, string[]>();
  for (const b of buckets) byStatus.set(ROUTER_BUCKET_STATUS[b], [...(byStatus.get(ROUTER_BUCKET_STATUS[b]) ?? []), b]);
  const out: Record<string, Obj> = {};
  for (const [status, group] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    out[String(status)] = {
      description: `RouterErrorResponse with \`error_type\` ${list(group)}.`,
      headers: { ...SERVICE_HEADERS, ...ERROR_TYPE_HEADER, ...(status === 429 ? RETRY_AFTER : {}), ...(extraHeaders[status] ?? {}) },
      content: { 'application/json': { schema: ref('RouterErrorResponse'), examples: Object.fromEntries(group.map((b) => [b, { value: { detail: '…', error_type: b } }])) } },
    };
  }
  return out;
}

export function json(schemaName: string, description: string, headers?: Obj): Obj {
  return { description, ...(headers ? { headers } : {}), content: { 'application/json': { schema: ref(schemaName) } } };
}
