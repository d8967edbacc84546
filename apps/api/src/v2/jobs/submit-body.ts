import { ApiError, isIdempotencyKey } from '#libs/contracts';

const EXTRA_DATA_KEYS = new Set(['api_key_comfy_org', 'auth_token_comfy_org']);
const RESERVED = new Set(['webhook_url', 'inputs']);

export interface SubmitBody {
  workflow: unknown;
  extraData?: Record<string, unknown>;
}

/** `{workflow, extra_data?}`; extra_data is closed to the partner-credential keys. */
export function parseSubmitBody(body: Record<string, unknown>): SubmitBody {
  for (const key of Object.keys(body)) {
    if (RESERVED.has(key)) throw ApiError.invalid(`"${key}" is reserved and not supported yet.`);
    if (key !== 'workflow' && key !== 'extra_data') throw ApiError.invalid(`Unknown field "${key}".`);
  }
  if (!('workflow' in body)) throw new ApiError('invalid_workflow', 'The body needs a "workflow" in the engine API format.');
  const extra = body.extra_data;
  if (extra === undefined || extra === null) return { workflow: body.workflow };
  if (typeof extra !== 'object' || Array.isArray(extra)) throw ApiError.invalid('extra_data must be an object.');
  for (const [key, value] of Object.entries(extra)) {
    if (!EXTRA_DATA_KEYS.has(key)) throw ApiError.invalid(`extra_data accepts only ${[...EXTRA_DATA_KEYS].join(', ')}.`);
    if (typeof value !== 'string' || value.length > 4096) throw ApiError.invalid(`extra_data.${key} must be a string.`);
  }
  return { workflow: body.workflow, extraData: extra as Record<string, unknown> };
}

export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || !isIdempotencyKey(value)) throw ApiError.invalid('Idempotency-Key must be 1 to 255 visible ASCII characters.');
  return value;
}

/** `Prefer: wait=N` in seconds, capped; undefined when absent. */
export function parsePreferWait(header: string | string[] | undefined, max: number): number | undefined {
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!value) return undefined;
  // RFC 7240: the name in any case, optional spaces around '=', the value bare or quoted. Any
  // number of digits: a long wait is capped like any other, not ignored.
  const m = /(?:^|[,;\s])wait\s*=\s*("?)(\d{1,100})\1(?:$|[,;\s])/i.exec(value);
  if (!m) return undefined;
  return Math.min(Number(m[2]), max);
}
