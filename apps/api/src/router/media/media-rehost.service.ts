import path from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import { guessContentType, recordStoredAsset } from '#libs/assets';
import type { Db } from '#libs/db';
import { linkLifetimeSeconds, TooLargeError, type BlobStore, type StoredBlob } from '#libs/storage';
import { componentLogger } from '#libs/logging';
import { BLOB_STORE, DB } from '../../core/tokens.js';
import { errorResult, type GenerationResult, type MediaRefs, type UpstreamModel } from '../adapters/adapter.js';
import { UpstreamBroken, UpstreamTimeout, UpstreamUnreachable, upstreamStream } from '../adapters/upstream-http.js';
import { mayHoldUrl, replaceStrings, stringsAt } from './json-strings.js';

// Media a provider returns by URL expires at the provider (BFL's in about ten minutes). Before
// anyone sees a result, each such URL is downloaded into the blob store (streamed, hashed with
// blake3 on the way, never held whole), recorded as an asset of the calling workspace that expires
// in 24 hours (tagged `router`), and replaced in the body by a signed URL valid as long.

export const MEDIA_LIFETIME_S = 24 * 3600;
const MAX_MEDIA_BYTES = 2 * 1024 * 1024 * 1024;
const MAX_REDIRECTS = 3;
const PARALLEL = 4;

/** Where media re-hosted for a call goes: its workspace, its id, and the origin its signed URLs name. */
export interface MediaTarget {
  accountId: string;
  callId: string;
  origin(): string;
}

/** The provider's media could not be had (gone, expired, cut off). */
class MediaUnavailable extends Error {}
/** The blob store would not take the media. */
class StoreUnavailable extends Error {}

@Injectable()
export class MediaRehostService {
  private readonly logger = componentLogger('RouterMedia');

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
  ) {}

  /** The result with its media URLs re-hosted; a result without media passes as it is. */
  async rehost(result: GenerationResult, model: UpstreamModel, target: MediaTarget, signal: AbortSignal): Promise<GenerationResult> {
    const { media, ...rest } = result;
    if (!media || result.bucket !== 'success') return rest;
    const text = result.body.toString('utf8');
    if (!mayHoldUrl(text)) return rest;
    const found = stringsAt(text, media.paths).filter((s) => /^https?:\/\//i.test(s.value));
    if (found.length === 0) return rest;
    const urls = [...new Set(found.map((s) => s.value))];
    const signed = new Map<string, string>();
    try {
      for (let i = 0; i < urls.length; i += PARALLEL) {
        // Every transfer of a batch ends (recorded or not) before a failure ends the call.
        const batch = await Promise.allSettled(urls.slice(i, i + PARALLEL).map(async (url, j) => signed.set(url, await this.rehostOne(url, i + j, model, media, target, signal))));
        const failed = batch.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed) throw failed.reason;
      }
    } catch (err) {
      if (err instanceof MediaUnavailable) return errorResult('provider_error', `The provider's result media could not be fetched (${err.message}).`);
      if (err instanceof StoreUnavailable) return errorResult('service_unavailable', 'The router could not store the result media right now; retry with backoff.');
      if (signal.aborted || err instanceof UpstreamTimeout) return errorResult('provider_timeout', "The provider's result media did not arrive within its deadline.");
      throw err;
    }
    return { ...rest, body: Buffer.from(replaceStrings(text, found.map((at) => ({ at, value: signed.get(at.value)! })))) };
  }

  private async rehostOne(url: string, index: number, model: UpstreamModel, media: MediaRefs, target: MediaTarget, signal: AbortSignal): Promise<string> {
    // The record outlives its link by a minute: the link gets its whole 24 hours.
    const expiresAt = new Date(Date.now() + (MEDIA_LIFETIME_S + 60) * 1000);
    let { stored, contentType } = await this.download(url, model, media, signal);
    const fileName = `${index}${extensionFor(url, contentType)}`;
    const asset = { accountId: target.accountId, filePath: `router/${target.callId}/${fileName}`, contentType, tags: ['router', model.id], expiresAt };
    // Retention may have deleted identical bytes between the write and the record: write them again.
    if (!(await recordStoredAsset(this.db, this.store, stored, asset))) ({ stored, contentType } = await this.download(url, model, media, signal));
    const link = await this.store.signedUrl(stored.hash, { fileName, contentType, expiresInSeconds: linkLifetimeSeconds(MEDIA_LIFETIME_S, expiresAt), origin: target.origin() });
    return link.url;
  }

  /** Streams the media into the store; the provider's credentials go along only to its own origin. */
  private async download(url: string, model: UpstreamModel, media: MediaRefs, signal: AbortSignal): Promise<{ stored: StoredBlob; contentType: string }> {
    const providerOrigin = new URL(model.upstreamUrl).origin;
    let current = url;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const headers = media.headers && new URL(current).origin === providerOrigin ? media.headers : undefined;
      let res: Awaited<ReturnType<typeof upstreamStream>>;
      try {
        res = await upstreamStream(current, { headers, signal });
      } catch (err) {
        if (err instanceof UpstreamUnreachable || err instanceof UpstreamBroken) throw new MediaUnavailable(err.message);
        throw err;
      }
      const location = res.headers.location;
      if (res.status >= 300 && res.status < 400 && typeof location === 'string') {
        res.body.resume();
        current = new URL(location, current).toString();
        if (!/^https?:/.test(current)) throw new MediaUnavailable('a redirect to a URL that is not http(s)');
        continue;
      }
      if (res.status !== 200) {
        res.body.resume();
        throw new MediaUnavailable(`HTTP ${res.status}`);
      }
      const contentType = String(res.headers['content-type'] ?? '').split(';')[0]!.trim() || guessContentType(new URL(current).pathname);
      try {
        return { stored: await this.store.put(res.body, { maxBytes: MAX_MEDIA_BYTES }), contentType };
      } catch (err) {
        if (err instanceof TooLargeError) throw new MediaUnavailable('larger than the router keeps');
        if (signal.aborted) throw new UpstreamTimeout('deadline');
        if (res.body.errored || !res.body.complete) throw new MediaUnavailable('the transfer broke off');
        this.logger.warn(`result media of ${model.id} not stored: ${(err as Error).message}`);
        throw new StoreUnavailable((err as Error).message);
      } finally {
        if (!res.body.readableEnded) res.body.destroy();
      }
    }
    throw new MediaUnavailable('too many redirects');
  }
}

function extensionFor(url: string, contentType: string): string {
  const fromUrl = path.extname(new URL(url).pathname).toLowerCase();
  if (/^\.[a-z0-9]{1,5}$/.test(fromUrl)) return fromUrl;
  const known: Record<string, string> = { 'image/png': '.png', 'image/jpeg': '.jpeg', 'image/webp': '.webp', 'video/mp4': '.mp4', 'audio/mpeg': '.mp3' };
  return known[contentType] ?? '';
}
