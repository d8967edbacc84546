import type { z } from 'zod';
import { ApiError, WEBHOOK_DESCRIPTION_MAX_LENGTH, WEBHOOK_URL_MAX_LENGTH, WebhookEndpointPatchSchema, WebhookEndpointRequestSchema } from '#libs/contracts';
import type { OutboundPolicy } from '#libs/outbound';
import { JOB_EVENTS, TERMINAL_JOB_EVENTS, hostRefusal, type JobEventType } from '#libs/webhooks';
import { parseWith } from '../contract/index.js';

// The bodies of `POST /api/v2/webhooks/endpoints` and `PATCH .../{id}`.

export interface EndpointInput {
  url: string;
  events: JobEventType[];
  description: string;
}

export interface EndpointPatch {
  url?: string;
  events?: JobEventType[];
  enabled?: boolean;
  description?: string;
}

/** Today's wording of each field's refusal (the schemas say which field failed, and how). */
const REFUSALS: Record<string, string> = {
  url: `url must be an absolute URL of at most ${WEBHOOK_URL_MAX_LENGTH} characters.`,
  events: `events must be a non-empty list of: ${JOB_EVENTS.join(', ')}.`,
  description: `description must be text of at most ${WEBHOOK_DESCRIPTION_MAX_LENGTH} characters.`,
  enabled: 'enabled must be true or false.',
};

/**
 * v2's validation error for an endpoint body: an unknown field is named first, then the first
 * field that failed, in its own words and with `details.field`.
 */
function refuseEndpoint(body: Record<string, unknown>) {
  return (issues: z.core.$ZodIssue[]): ApiError => {
    const unknown = issues.find((i) => i.code === 'unrecognized_keys' && i.path.length === 0);
    if (unknown?.code === 'unrecognized_keys') return ApiError.invalid(`Unknown field "${unknown.keys[0]}".`, { field: unknown.keys[0] });
    const issue = issues[0]!;
    const field = String(issue.path[0]);
    // A string that does not parse as a URL is said so; an empty or missing one gets the general rule.
    if (field === 'url' && issue.code === 'invalid_format' && body.url !== '') return ApiError.invalid('url must be an absolute URL.', { field });
    return ApiError.invalid(REFUSALS[field] ?? issue.message, { field });
  };
}

/**
 * A target URL (already an absolute URL by its schema), under the service's outbound policy:
 * http(s) (https only in production), no credentials in it, and a host that is not a refused
 * address on its face (a non-public IP literal, `localhost`; loopback ones where the policy allows
 * them). Host names are checked on every connection, against what they then resolve to.
 */
function allowedUrl(value: string, rules: OutboundPolicy): string {
  const url = new URL(value);
  const schemes = rules.requireHttps ? ['https:'] : ['https:', 'http:'];
  if (!schemes.includes(url.protocol)) throw ApiError.invalid(`url must use ${rules.requireHttps ? 'https' : 'http or https'}.`, { field: 'url' });
  if (url.username || url.password) throw ApiError.invalid('url must not carry credentials; the signature authenticates each delivery.', { field: 'url' });
  const refused = hostRefusal(url.hostname, rules);
  if (refused) throw ApiError.invalid(`url must reach a public address: ${refused}.`, { field: 'url' });
  return url.toString();
}

const distinct = (events: JobEventType[]): JobEventType[] => [...new Set(events)];

/** `{url, events?, description?}` (WebhookEndpointRequest); `events` omitted means the four terminal job events. */
export function parseEndpointInput(body: Record<string, unknown>, rules: OutboundPolicy): EndpointInput {
  const parsed = parseWith(WebhookEndpointRequestSchema, body, refuseEndpoint(body));
  return {
    url: allowedUrl(parsed.url, rules),
    events: parsed.events ? distinct(parsed.events) : [...TERMINAL_JOB_EVENTS],
    description: parsed.description ?? '',
  };
}

/** Any of `{url, events, enabled, description}` (WebhookEndpointPatch). */
export function parseEndpointPatch(body: Record<string, unknown>, rules: OutboundPolicy): EndpointPatch {
  const parsed = parseWith(WebhookEndpointPatchSchema, body, refuseEndpoint(body));
  const patch: EndpointPatch = {};
  if (parsed.url !== undefined) patch.url = allowedUrl(parsed.url, rules);
  if (parsed.events !== undefined) patch.events = distinct(parsed.events);
  if (parsed.description !== undefined) patch.description = parsed.description;
  if (parsed.enabled !== undefined) patch.enabled = parsed.enabled;
  return patch;
}
