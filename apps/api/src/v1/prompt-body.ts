import type { z } from 'zod';
import { V1PromptRequestSchema } from '#libs/contracts';
import { parseWith } from '../contract/index.js';
import { BadBody, parseJsonObject } from './http/engine-body.js';

export interface PromptRequest {
  prompt: unknown;
  promptId?: string;
  clientId: string | null;
  /** What reaches the engine for this run only (partner keys, PNG info); never stored in the database. */
  extraData: Record<string, unknown>;
}

/**
 * The engine's words for a field V1PromptRequest refuses: its 400 `{error: {type, message,
 * details}}`. The first field of the path picks the wording; `extra_data.<key>` names the key.
 */
function refusePrompt(body: Record<string, unknown>) {
  return (issues: z.core.$ZodIssue[]): BadBody => {
    const path = issues[0]!.path.map(String);
    switch (path[0]) {
      case 'prompt':
        return new BadBody('no_prompt', 'No prompt provided', 'No prompt provided');
      case 'prompt_id':
        return new BadBody('invalid_prompt', 'prompt_id must be a UUID', `prompt_id: ${JSON.stringify(body.prompt_id).slice(0, 100)}`);
      case 'client_id':
        return new BadBody('invalid_prompt', 'client_id must be a string', 'client_id');
      default: {
        const key = path[1];
        if (key === undefined) return new BadBody('invalid_prompt', 'extra_data must be an object', 'extra_data');
        if (key === 'extra_pnginfo') return new BadBody('invalid_prompt', 'extra_data.extra_pnginfo must be an object of at most 1 MB', 'extra_data.extra_pnginfo');
        return new BadBody('invalid_prompt', `extra_data.${key} must be a string`, `extra_data.${key}`);
      }
    }
  };
}

/**
 * `POST /api/prompt`: `{prompt, client_id?, extra_data?, prompt_id?, number?, front?}`.
 * `number` and `front` are accepted and ignored: the queue is fair per account, not global.
 */
export function parsePromptBody(raw: unknown): PromptRequest {
  const body = parseJsonObject(raw);
  const parsed = parseWith(V1PromptRequestSchema, body, refusePrompt(body));
  return { prompt: parsed.prompt, promptId: parsed.prompt_id?.toLowerCase(), clientId: parsed.client_id || null, extraData: extraDataForEngine(parsed.extra_data) };
}

/**
 * The service's partner key (`api_key_service_org`) is the engine's `api_key_comfy_org`; either
 * travels to the engine sealed in the job's vault entry and is never stored or shown again.
 */
function extraDataForEngine(given: z.output<typeof V1PromptRequestSchema>['extra_data']): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!given) return out;
  const partnerKey = given.api_key_service_org || given.api_key_comfy_org;
  if (partnerKey) out.api_key_comfy_org = partnerKey;
  if (given.auth_token_comfy_org) out.auth_token_comfy_org = given.auth_token_comfy_org;
  if (given.extra_pnginfo) out.extra_pnginfo = given.extra_pnginfo;
  return out;
}
