import { createBLAKE3 } from 'hash-wasm';
import { ensureOk, unwrap, type Transport } from './client.js';
import { ComfyCloudError, errorOf } from './errors.js';
import { createOnce, type RetryOptions } from './idempotent.js';
import type { Asset, Output } from './types.js';

export interface UploadOptions extends RetryOptions {
  /** Where the asset lives in your store (`photo.png`, `models/loras/ink.safetensors`). */
  filePath: string;
  contentType?: string;
  tags?: string[];
  /** Seconds until the asset expires (60 to 604800). */
  expiresIn?: number;
  /** For the multipart upload, when the bytes are new; a fresh UUID when omitted. */
  idempotencyKey?: string;
}

export interface UploadResult {
  asset: Asset;
  /** True when the bytes were already stored and only a record was made (`from-hash`): nothing was sent. */
  deduplicated: boolean;
}

/** `blake3:<hex>` of the bytes, read as a stream so a large file is never held twice. */
export async function blake3Of(data: Blob | Uint8Array): Promise<string> {
  const hasher = await createBLAKE3();
  if (data instanceof Uint8Array) hasher.update(data);
  else for await (const chunk of data.stream() as unknown as AsyncIterable<Uint8Array>) hasher.update(chunk);
  return `blake3:${hasher.digest('hex')}`;
}

/**
 * Uploads bytes once per store: hashes them (blake3, as the server does), asks whether a blob with
 * that hash is already usable (`HEAD /api/v2/assets/by-hash/{hash}`), and if so records the asset
 * from it (`POST /api/v2/assets/from-hash`) without sending a byte; otherwise, or when the blob
 * went away in between (`404 blob_not_found`), uploads the bytes with their hash as
 * `expected_hash`, so a corruption on the way is refused (`409 hash_mismatch`).
 */
export async function uploadAsset(t: Transport, data: Blob | Uint8Array, options: UploadOptions): Promise<UploadResult> {
  const blob = data instanceof Blob ? data : new Blob([data as Uint8Array<ArrayBuffer>]);
  const hash = await blake3Of(blob);
  const known = await t.api.HEAD('/api/v2/assets/by-hash/{hash}', { params: { path: { hash } }, signal: options.signal });
  if (known.response.ok) {
    const body = { hash, file_path: options.filePath, ...(options.tags ? { tags: options.tags } : {}), ...(options.expiresIn ? { expires_in: options.expiresIn } : {}) };
    const made = await t.api.POST('/api/v2/assets/from-hash', { body, signal: options.signal });
    if (made.response.ok) return { asset: unwrap(made), deduplicated: true };
    const error = ComfyCloudError.from(made.response, made.error);
    if (error.code !== 'blob_not_found') throw error;
  } else if (known.response.status !== 404) {
    throw ComfyCloudError.from(known.response, null);
  }
  return { asset: await uploadBytes(t, blob, hash, options), deduplicated: false };
}

function uploadBytes(t: Transport, blob: Blob, hash: string, options: UploadOptions): Promise<Asset> {
  const headers = { 'idempotency-key': options.idempotencyKey ?? crypto.randomUUID() };
  const form = () => {
    const f = new FormData();
    f.append('file_path', options.filePath);
    f.append('expected_hash', hash);
    if (options.contentType) f.append('content_type', options.contentType);
    for (const tag of options.tags ?? []) f.append('tags[]', tag);
    if (options.expiresIn) f.append('expires_in', String(options.expiresIn));
    f.append('file', blob, options.filePath.split('/').pop());
    return f;
  };
  // The typed body is the document's multipart schema; the form built here is what goes out.
  const send = async () => unwrap(await t.api.POST('/api/v2/assets', { body: {} as never, bodySerializer: form, headers, signal: options.signal }));
  return createOnce(send, 'asset_id', (id) => getAsset(t, id, options.signal), options);
}

export async function getAsset(t: Transport, id: string, signal?: AbortSignal): Promise<Asset> {
  return unwrap(await t.api.GET('/api/v2/assets/{id}', { params: { path: { id } }, signal }));
}

export interface Download {
  body: ReadableStream<Uint8Array>;
  contentType: string | null;
  /** From `Content-Length`, when the server sent it. */
  size: number | null;
}

/**
 * Opens an output or asset for reading, as a stream. An object with a signed `url` is fetched
 * from it with no credential (the link is the credential; it may point at a bucket that must never
 * see your key); when it has expired, or for a bare asset id, `GET /api/v2/assets/{id}/content`
 * is asked for a fresh signed URL (its 302), which is then followed the same way.
 */
export async function openDownload(t: Transport, target: Output | Asset | string, signal?: AbortSignal): Promise<Download> {
  if (typeof target !== 'string') {
    const signed = await t.fetchPublic(t.request(target.url, { signal }));
    if (signed.ok) return asDownload(signed);
    if (signed.status !== 403 && signed.status !== 404) throw await errorOf(signed);
    await signed.body?.cancel();
  }
  const id = typeof target === 'string' ? target : target.id;
  const { response } = await t.api.GET('/api/v2/assets/{id}/content', { params: { path: { id } }, parseAs: 'stream', redirect: 'manual', signal });
  const location = response.status >= 300 && response.status < 400 ? response.headers.get('location') : null;
  if (!location) return asDownload(await ensureOk(response));
  await response.body?.cancel();
  return asDownload(await ensureOk(await t.fetchPublic(t.request(new URL(location, response.url || t.baseUrl).toString(), { signal }))));
}

function asDownload(response: Response): Download {
  const length = response.headers.get('content-length');
  return { body: response.body!, contentType: response.headers.get('content-type'), size: length === null ? null : Number(length) };
}
