import { isStorableText, isUuid } from '#libs/contracts';
import { BadBody, parseJsonObject } from './http/engine-body.js';

export interface PromptRequest {
  prompt: unknown;
  promptId?: string;
  clientId: string | null;
  /** What reaches the engine for this run only (partner keys, PNG info); never stored in the database. */
  extraData: Record<string, unknown>;
}

const MAX_SECRET = 4096;
const MAX_PNGINFO_BYTES = 1024 * 1024;

/**
 * `POST /api/prompt`: `{prompt, client_id?, extra_data?, prompt_id?, number?, front?}`.
 * `number` and `front` are accepted and ignored: the queue is fair per account, not global.
 */
export function parsePromptBody(raw: unknown): PromptRequest {
  const body = parseJsonObject(raw);
  if (!('prompt' in body) || body.prompt === null || body.prompt === undefined) {
    throw new BadBody('no_prompt', 'No prompt provided', 'No prompt provided');
  }
  let promptId: string | undefined;
  if (body.prompt_id !== undefined && body.prompt_id !== null) {
    if (typeof body.prompt_id !== 'string' || !isUuid(body.prompt_id)) {
      throw new BadBody('invalid_prompt', 'prompt_id must be a UUID', `prompt_id: ${JSON.stringify(body.prompt_id).slice(0, 100)}`);
    }
    promptId = body.prompt_id.toLowerCase();
  }
  let clientId: string | null = null;
  if (body.client_id !== undefined && body.client_id !== null) {
    // It is stored with the job.
    if (typeof body.client_id !== 'string' || body.client_id.length > 256 || !isStorableText(body.client_id)) {
      throw new BadBody('invalid_prompt', 'client_id must be a string', 'client_id');
    }
    clientId = body.client_id || null;
  }
  return { prompt: body.prompt, promptId, clientId, extraData: extraDataForEngine(body.extra_data) };
}

/**
 * The service's partner key (`api_key_service_org`) is the engine's `api_key_comfy_org`; either
 * travels to the engine sealed in the job's vault entry and is never stored or shown again.
 */
function extraDataForEngine(value: unknown): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new BadBody('invalid_prompt', 'extra_data must be an object', 'extra_data');
  const given = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const secret = (name: string): string | undefined => {
    const v = given[name];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string' || v.length > MAX_SECRET) throw new BadBody('invalid_prompt', `extra_data.${name} must be a string`, `extra_data.${name}`);
    return v;
  };
  const partnerKey = secret('api_key_service_org') ?? secret('api_key_comfy_org');
  if (partnerKey) out.api_key_comfy_org = partnerKey;
  const token = secret('auth_token_comfy_org');
  if (token) out.auth_token_comfy_org = token;
  const pnginfo = given.extra_pnginfo;
  if (pnginfo !== undefined && pnginfo !== null) {
    if (typeof pnginfo !== 'object' || Array.isArray(pnginfo) || JSON.stringify(pnginfo).length > MAX_PNGINFO_BYTES) {
      throw new BadBody('invalid_prompt', 'extra_data.extra_pnginfo must be an object of at most 1 MB', 'extra_data.extra_pnginfo');
    }
    out.extra_pnginfo = pnginfo;
  }
  return out;
}
