import createClient, { type Client } from 'openapi-fetch';
import { ComfyCloudError, errorOf } from './errors.js';
import type { paths } from './types.js';

export interface ComfyCloudOptions {
  /** Where the API is mounted, e.g. `https://cloud.example.com` or `http://127.0.0.1:8080/gw`. */
  baseUrl: string;
  /** The account's API key: v2 (and the router, unless `routerToken` is given). */
  apiKey?: string;
  /** A router JWT for `/v1/models…`; the API key is taken in its place when absent. */
  routerToken?: string;
  /** A fetch of your own (a proxy, a test double); `globalThis.fetch` by default. */
  fetch?: (request: Request) => Promise<Response>;
}

/**
 * The transport every helper shares: the generated, typed client (`api`) and a fetch that adds
 * the right credential per surface, for what the generated client does not cover (event streams,
 * downloads of signed URLs).
 */
export class Transport {
  readonly baseUrl: string;
  readonly api: Client<paths>;
  private readonly routerPrefix: string;
  private readonly send: (request: Request) => Promise<Response>;

  constructor(readonly options: ComfyCloudOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.routerPrefix = `${new URL(this.baseUrl).pathname.replace(/\/+$/, '')}/v1/models`;
    this.send = options.fetch ?? ((request) => globalThis.fetch(request));
    this.api = createClient<paths>({ baseUrl: this.baseUrl, fetch: (request) => this.fetch(request) });
  }

  /** Sends `request` with the credential of its surface, unless it carries one already. */
  fetch(request: Request): Promise<Response> {
    const token = new URL(request.url).pathname.startsWith(this.routerPrefix) ? (this.options.routerToken ?? this.options.apiKey) : this.options.apiKey;
    if (token && !request.headers.has('authorization')) request.headers.set('authorization', `Bearer ${token}`);
    return this.send(request);
  }

  /** Sends `request` as it is, with no credential: signed URLs carry their own. */
  fetchPublic(request: Request): Promise<Response> {
    return this.send(request);
  }

  /** `path` (relative to the base URL) or an absolute URL, as a Request. */
  request(pathOrUrl: string, init: RequestInit = {}): Request {
    const url = /^https?:\/\//.test(pathOrUrl) ? pathOrUrl : `${this.baseUrl}${pathOrUrl}`;
    return new Request(url, init);
  }
}

/** The data of an openapi-fetch answer, or its error as a ComfyCloudError. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.response.ok && result.error === undefined) return result.data as T;
  throw ComfyCloudError.from(result.response, result.error);
}

/** A raw answer that must be a success, else its ComfyCloudError. */
export async function ensureOk(response: Response): Promise<Response> {
  if (!response.ok) throw await errorOf(response);
  return response;
}
