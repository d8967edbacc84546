import { Controller, Get, Inject, Param, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import { isBlake3Hex, verifyBlobUrl, type BlobStore } from '#libs/storage';
import { BLOB_STORE, CONFIG } from '../core/tokens.js';
import { Uncompressed } from '../http/compression.js';
import { sendBlob } from '../http/send-blob.js';

/**
 * Serves the local-directory store's signed URLs. The signature is the only credential: these
 * URLs are handed to clients (and to v1's `/api/view` redirect) to fetch without an API key.
 */
@Controller('blobs')
export class BlobsController {
  constructor(
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  // Fastify answers HEAD through this GET route as well.
  @Get(':hash')
  @Uncompressed()
  async get(@Param('hash') hash: string, @Query() query: Record<string, string>, @Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<FastifyReply> {
    if (this.store.driver !== 'local' || !isBlake3Hex(hash)) throw ApiError.notFound('blob');
    const verdict = verifyBlobUrl(this.config.signingSecret, hash, query);
    if (!verdict.ok) {
      throw new ApiError('forbidden', verdict.reason === 'expired' ? 'This signed URL has expired.' : 'This signed URL is not valid.');
    }
    reply.header('cache-control', 'private, max-age=300');
    return sendBlob(request, reply, this.store, { hash, fileName: verdict.params.fileName, contentType: verdict.params.contentType });
  }
}
