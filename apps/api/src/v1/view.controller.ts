import { Controller, Get, Inject, Query, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { ApiError, V1ViewQuerySchema } from '#libs/contracts';
import type { Account } from '#libs/db';
import { linkLifetimeSeconds, type BlobStore } from '#libs/storage';
import { ApiKeyHeaderGuard, CurrentAccount } from '../auth/index.js';
import { parseWith } from '../contract/index.js';
import { BLOB_STORE, CONFIG } from '../core/tokens.js';
import { Uncompressed } from '../http/compression.js';
import { requestOrigin } from '../http/request-origin.js';
import { sendBlob } from '../http/send-blob.js';
import { RateLimitGuard } from '../limits/index.js';
import { escapesFolder } from './files/file-names.js';
import { V1Files } from './files/v1-files.service.js';
import { v1Errors } from './http/engine-body.js';
import { RendersErrors } from '../http/error-renderer.js';

/**
 * `GET /api/view`: a redirect to a signed URL of the caller's file. The client must not follow it
 * with its API key; the signed URL is its own authorization and the response carries no credential.
 */
@RendersErrors(v1Errors)
@Controller('api')
@UseGuards(ApiKeyHeaderGuard, RateLimitGuard)
export class V1ViewController {
  constructor(
    private readonly files: V1Files,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Get('view')
  @Uncompressed()
  async view(@CurrentAccount() account: Account, @Query() query: unknown, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    // The engine has three folders and answers 400 for any other; an odd type is not read as "output".
    const { filename, subfolder = '', type = 'output' } = parseWith(V1ViewQuerySchema, query, (issues) => ApiError.invalid(issues[0]!.message));
    // As the engine answers: a file name that climbs out is a bad request, a subfolder that does is forbidden.
    if (escapesFolder(filename)) throw ApiError.invalid('filename must name a file, not a path outside its folder.');
    if (escapesFolder(subfolder)) throw new ApiError('forbidden', 'subfolder must stay inside its folder.');
    const found = await this.files.findByReference(account.id, { filename, subfolder, type });
    if (!found) throw ApiError.notFound('file');
    const { asset, name } = found;
    if (this.config.surface === 'self-hosted') {
      return sendBlob(request, reply, this.store, { hash: asset.blobHash, fileName: name, contentType: asset.contentType });
    }
    const signed = await this.store.signedUrl(asset.blobHash, {
      fileName: name,
      contentType: asset.contentType,
      expiresInSeconds: linkLifetimeSeconds(this.config.signedUrlTtlSeconds, asset.expiresAt),
      origin: requestOrigin(request, this.config),
    });
    return reply.status(302).header('location', signed.url).header('cache-control', 'no-store').send();
  }
}
