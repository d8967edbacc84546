import { ApiError } from '#libs/contracts';
import type { OutboundPolicy } from '#libs/outbound';
import { JOB_EVENTS, TERMINAL_JOB_EVENTS, hostRefusal, isJobEventType, type JobEventType } from '#libs/webhooks';

// The bodies of `POST /api/v2/webhooks/endpoints` and `PATCH .../{id}`.

const MAX_URL_LENGTH = 2048;
const MAX_DESCRIPTION_LENGTH = 500;
const CREATE_FIELDS = new Set(['url', 'events', 'description']);
const PATCH_FIELDS = new Set(['url', 'events', 'enabled', 'description']);

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


function refuseUnknown(body: Record<string, unknown>, known: Set<string>): void {
  for (const key of Object.keys(body)) if (!known.has(key)) throw ApiError.invalid(`Unknown field "${key}".`, { field: key });
}

/**
 * A target URL, under the service's outbound policy: absolute http(s) (https only in production),
 * no credentials in it, and a host that is not a refused address on its face (a non-public IP
 * literal, `localhost`; loopback ones where the policy allows them). Host names are checked on
 * every connection, against what they then resolve to.
 */
function parseUrl(value: unknown, rules: OutboundPolicy): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_URL_LENGTH) throw ApiError.invalid(`url must be an absolute URL of at most ${MAX_URL_LENGTH} characters.`, { field: 'url' });
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw ApiError.invalid('url must be an absolute URL.', { field: 'url' });
  }
  const schemes = rules.requireHttps ? ['https:'] : ['https:', 'http:'];
  if (!schemes.includes(url.protocol)) throw ApiError.invalid(`url must use ${rules.requireHttps ? 'https' : 'http or https'}.`, { field: 'url' });
  if (url.username || url.password) throw ApiError.invalid('url must not carry credentials; the signature authenticates each delivery.', { field: 'url' });
  const refused = hostRefusal(url.hostname, rules);
  if (refused) throw ApiError.invalid(`url must reach a public address: ${refused}.`, { field: 'url' });
  return url.toString();
}

function parseEvents(value: unknown): JobEventType[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every(isJobEventType)) {
    throw ApiError.invalid(`events must be a non-empty list of: ${JOB_EVENTS.join(', ')}.`, { field: 'events' });
  }
  return [...new Set(value)];
}

function parseDescription(value: unknown): string {
  if (typeof value !== 'string' || value.length > MAX_DESCRIPTION_LENGTH) throw ApiError.invalid(`description must be text of at most ${MAX_DESCRIPTION_LENGTH} characters.`, { field: 'description' });
  return value;
}

/** `{url, events?, description?}`; `events` omitted means the four terminal job events. */
export function parseEndpointInput(body: Record<string, unknown>, rules: OutboundPolicy): EndpointInput {
  refuseUnknown(body, CREATE_FIELDS);
  return {
    url: parseUrl(body.url, rules),
    events: body.events === undefined ? [...TERMINAL_JOB_EVENTS] : parseEvents(body.events),
    description: body.description === undefined ? '' : parseDescription(body.description),
  };
}

/** Any of `{url, events, enabled, description}`. */
export function parseEndpointPatch(body: Record<string, unknown>, rules: OutboundPolicy): EndpointPatch {
  refuseUnknown(body, PATCH_FIELDS);
  const patch: EndpointPatch = {};
  if (body.url !== undefined) patch.url = parseUrl(body.url, rules);
  if (body.events !== undefined) patch.events = parseEvents(body.events);
  if (body.description !== undefined) patch.description = parseDescription(body.description);
  if (body.enabled !== undefined) {
    if (typeof body.enabled !== 'boolean') throw ApiError.invalid('enabled must be true or false.', { field: 'enabled' });
    patch.enabled = body.enabled;
  }
  return patch;
}
