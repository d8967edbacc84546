import path from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { validateFilePath } from '#libs/assets';
import { ApiError, AssetFromUrlSchema, type AssetView } from '#libs/contracts';
import { openDownload, OutboundError } from '#libs/outbound';
import type { StoredBlob } from '#libs/storage';
import { CONFIG } from '../../core/tokens.js';
import { parseV2Input } from '../parse-input.js';
import { AssetsService, partContentType, type Owner } from './assets.service.js';

/** The file name a URL ends in, when it is a plain one; otherwise a stand-in. */
function nameFromUrl(url: URL): string {
  let last = '';
  try {
    last = decodeURIComponent(url.pathname.split('/').pop() ?? '');
  } catch {
    last = '';
  }
  return last && !validateFilePath(last) && !last.includes('/') ? last : 'download.bin';
}

function importFailed(err: OutboundError): ApiError {
  if (err.reason === 'too_large') return new ApiError('payload_too_large', err.message);
  if (err.reason === 'scheme') return ApiError.invalid(err.message);
  return new ApiError('import_failed', err.message, { reason: err.reason, ...(err.status ? { status: err.status } : {}) });
}

/**
 * Imports a file from a URL (a model hub's download link) as an asset: fetched by the service
 * under its outbound rules (libs/outbound: no private or reserved targets, loopback only where
 * an operator allows it, redirects checked the same way), streamed into the store with blake3 on
 * the way, at most URL_IMPORT_MAX_BYTES and URL_IMPORT_TIMEOUT_SECONDS, then recorded as any upload.
 */
@Injectable()
export class UrlImports {
  constructor(
    private readonly assets: AssetsService,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  async import(account: Owner, json: unknown, request: FastifyRequest): Promise<{ view: AssetView; createdNew: boolean }> {
    const body = parseV2Input(AssetFromUrlSchema, json);
    const given = body.file_path;
    const contentType = body.content_type;
    const expectedHash = body.expected_hash;
    const tags = body.tags ?? [];
    const expiresIn = body.expires_in;
    const url = new URL(body.url);
    // Before any byte is fetched: the path's rules, and whether the account has room at all.
    const filePath = await this.assets.checkPlacement(account, given ?? nameFromUrl(url), 0);
    const maxBytes = this.config.urlImports.maxBytes;
    const signal = AbortSignal.timeout(this.config.urlImports.timeoutSeconds * 1000);
    const policy = { allowLoopback: this.config.outboundAllowLoopback, requireHttps: this.config.env === 'production' };
    let stored: StoredBlob;
    let mimeType: string | undefined;
    try {
      const download = await openDownload(url.href, policy, { maxBytes, signal });
      mimeType = download.contentType ?? undefined;
      if (download.contentLength !== null) {
        await this.assets.checkPlacement(account, filePath, download.contentLength).catch((err: unknown) => {
          download.body.destroy();
          throw err;
        });
      }
      stored = await this.assets.storeBytes(download.body, maxBytes);
    } catch (err) {
      if (err instanceof OutboundError) throw importFailed(err);
      if (signal.aborted && !(err instanceof ApiError)) throw importFailed(new OutboundError('timeout', 'The download took longer than allowed.'));
      if (!(err instanceof ApiError)) throw importFailed(new OutboundError('network', `The download broke off: ${(err as Error).message.slice(0, 200)}`));
      throw err;
    }
    try {
      return await this.assets.finishUpload(account, stored, { fileName: path.posix.basename(filePath), mimeType: partContentType(mimeType), filePath, contentType, expectedHash, tags, expiresIn }, request);
    } catch (err) {
      await this.assets.discardUnrecorded(stored);
      throw err;
    }
  }
}
