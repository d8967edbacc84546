import type { GenerationResult, MediaRefs, UpstreamModel } from './adapter.js';
import { jsonSuccess, transportResult } from './outcomes.js';
import { upstreamRequest, type UpstreamRequest, type UpstreamResponse } from './upstream-http.js';

/** One request to the provider; a transport failure comes back already as its result. */
export async function exchange(url: string, request: UpstreamRequest): Promise<UpstreamResponse | GenerationResult> {
  try {
    return await upstreamRequest(url, request);
  } catch (err) {
    return transportResult(err);
  }
}

/**
 * A provider that answers the POST itself with JSON: its success (media to re-host at `media`),
 * or what the adapter reads in its refusal.
 */
export async function synchronousJson(model: UpstreamModel, body: Buffer, signal: AbortSignal, headers: Record<string, string>, media: MediaRefs, refusal: (res: UpstreamResponse) => GenerationResult): Promise<GenerationResult> {
  const res = await exchange(model.upstreamUrl, { method: 'POST', headers, body, signal });
  if (isResult(res)) return res;
  return res.status >= 200 && res.status < 300 ? jsonSuccess(res, model, media) : refusal(res);
}

export function isResult(value: UpstreamResponse | GenerationResult): value is GenerationResult {
  return 'bucket' in value;
}

/** Whether `candidate` may be asked in the provider's name: its API's origin, or (https) a sibling host of it. */
export function sameProvider(candidate: string, upstreamUrl: string): boolean {
  let url: URL;
  try {
    url = new URL(candidate);
  } catch {
    return false;
  }
  const upstream = new URL(upstreamUrl);
  if (url.origin === upstream.origin) return true;
  // api.bfl.ai hands out api.us1.bfl.ai: a host under the API host's parent domain.
  const labels = upstream.hostname.split('.');
  if (url.protocol !== 'https:' || upstream.protocol !== 'https:' || labels.length < 3) return false;
  return url.hostname.endsWith(`.${labels.slice(1).join('.')}`);
}
