import { Controller, Delete, Head, Inject, Patch, Post, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import type { Account } from '#libs/db';
import { BearerAuthGuard, CurrentAccount } from '../../auth/index.js';
import { CONFIG } from '../../core/tokens.js';
import { Uncompressed } from '../../http/compression.js';
import { requestOrigin } from '../../http/request-origin.js';
import { RateLimitGuard } from '../../limits/index.js';
import { ResumableUploads } from './resumable-uploads.service.js';
import { sendWebResponse, toWebRequest } from './web-exchange.js';
import { envelopeErrors, RendersErrors } from '../../http/error-renderer.js';

/**
 * Resumable uploads (the tus protocol, v1.0.0 with creation, creation-with-upload, termination
 * and expiration): `POST /api/v2/uploads` creates one, `HEAD …/{id}` tells its offset, `PATCH
 * …/{id}` appends bytes from there, `DELETE …/{id}` abandons it. Authenticated like the rest of
 * v2. (No `OPTIONS` discovery: the API's CORS layer owns that method.)
 */
@RendersErrors(envelopeErrors)
@Controller('api/v2/uploads')
@UseGuards(BearerAuthGuard, RateLimitGuard)
export class UploadsController {
  constructor(
    private readonly uploads: ResumableUploads,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  private async serve(account: Account, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const response = await this.uploads.handle(toWebRequest(request, requestOrigin(request, this.config)), { account, request });
    return sendWebResponse(reply, response);
  }

  @Post()
  @Uncompressed()
  create(@CurrentAccount() account: Account, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    return this.serve(account, request, reply);
  }

  @Head(':id')
  offset(@CurrentAccount() account: Account, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    return this.serve(account, request, reply);
  }

  @Patch(':id')
  @Uncompressed()
  append(@CurrentAccount() account: Account, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    return this.serve(account, request, reply);
  }

  @Delete(':id')
  abandon(@CurrentAccount() account: Account, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    return this.serve(account, request, reply);
  }
}
