import { Body, Controller, Delete, Get, Head, HttpCode, Inject, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { AssetUploadFieldsSchema, IdempotencyKeySchema, type AssetView } from '#libs/contracts';
import type { Account } from '#libs/db';
import type { BlobStore, StoredBlob } from '#libs/storage';
import { BearerAuthGuard, CurrentAccount } from '../../auth/index.js';
import { BLOB_STORE, CONFIG } from '../../core/tokens.js';
import { RateLimitGuard } from '../../limits/index.js';
import { Uncompressed } from '../../http/compression.js';
import { requireJsonObject } from '../../http/json-body.js';
import { sendBlob } from '../../http/send-blob.js';
import { UuidPipe } from '../../http/uuid.pipe.js';
import { pageOf } from '../paging.js';
import { AssetList } from './asset-list.js';
import { AssetsService } from './assets.service.js';
import { lastValues, readMultipartUpload } from './multipart-upload.js';
import { UploadKeys } from './upload-keys.js';
import { UrlImports } from './url-import.js';
import { parseV2Input } from '../parse-input.js';
import { envelopeErrors, RendersErrors } from '../../http/error-renderer.js';
@RendersErrors(envelopeErrors)
@Controller('api/v2/assets')
@UseGuards(BearerAuthGuard, RateLimitGuard)
export class AssetsController {
  constructor(
    private readonly assets: AssetsService,
    private readonly keys: UploadKeys,
    private readonly imports: UrlImports,
    private readonly list: AssetList,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Post()
  async upload(@CurrentAccount() account: Account, @Req() request: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply): Promise<AssetView> {
    const key = parseV2Input(IdempotencyKeySchema, request.headers['idempotency-key']);
    // A used key is refused before a byte of the body is read or stored.
    if (key) await this.keys.refuseUsed(account.id, key);
    const discard = (stored: StoredBlob) => this.assets.discardUnrecorded(stored);
    const parsed = await readMultipartUpload(request, 'file', (stream) => this.assets.storeBytes(stream), discard);
    // The bytes are stored before the fields can be judged; a refused upload must leave none behind.
    try {
      const f = parsed.fields;
      // A plain `tags` field is read as more `tags[]` (clients that leave the brackets out).
      const tags = [...(f.get('tags[]') ?? []), ...(f.get('tags') ?? [])];
      const fields = parseV2Input(AssetUploadFieldsSchema, { ...lastValues(f), 'tags[]': tags });
      const { view, createdNew } = await this.assets.finishUpload(
        account,
        parsed.stored,
        {
          fileName: parsed.fileName,
          mimeType: parsed.mimeType,
          expectedHash: fields.expected_hash,
          contentType: fields.content_type,
          filePath: fields.file_path,
          tags: fields['tags[]'] ?? [],
          expiresIn: fields.expires_in,
        },
        request,
      );
      if (key) await this.keys.claim(account.id, key, view.id);
      reply.status(createdNew ? 201 : 200);
      return view;
    } catch (err) {
      // Not caught: an upload refused with "nothing was stored" must not answer so when it failed to delete.
      await discard(parsed.stored);
      throw err;
    }
  }

  /** A file fetched from a URL by the service, recorded like an upload (201 when its bytes are new to the caller). */
  @Post('from-url')
  async fromUrl(@CurrentAccount() account: Account, @Body() body: unknown, @Req() request: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply): Promise<AssetView> {
    const key = parseV2Input(IdempotencyKeySchema, request.headers['idempotency-key']);
    if (key) await this.keys.refuseUsed(account.id, key);
    const { view, createdNew } = await this.imports.import(account, requireJsonObject(request, body), request);
    if (key) await this.keys.claim(account.id, key, view.id);
    reply.status(createdNew ? 201 : 200);
    return view;
  }

  @Get()
  async listAssets(@CurrentAccount() account: Account, @Query() query: Record<string, unknown>, @Req() request: FastifyRequest) {
    const q = this.list.parse(query, account.id);
    const rows = await this.list.page(account.id, q);
    const views = await Promise.all(rows.slice(0, q.limit).map((a) => this.assets.view(a, a.blob.sizeBytes, request)));
    return pageOf(rows, q.limit, views, (last) => this.list.nextCursor(account.id, last));
  }

  @Post('from-hash')
  async fromHash(
    @CurrentAccount() account: Account,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<AssetView> {
    const { view, created } = await this.assets.fromHash(account, requireJsonObject(request, body), request);
    reply.status(created ? 201 : 200);
    return view;
  }

  @Head('by-hash/:hash')
  async byHash(@CurrentAccount() account: Account, @Param('hash') hash: string, @Res() reply: FastifyReply): Promise<void> {
    const found = await this.assets.hasBlob(account, hash);
    reply.status(found ? 200 : 404).send();
  }

  @Get(':id')
  async get(@CurrentAccount() account: Account, @Param('id', new UuidPipe('asset')) id: string, @Req() request: FastifyRequest): Promise<AssetView> {
    const asset = await this.assets.find(account, id);
    return this.assets.view(asset, asset.blob.sizeBytes, request);
  }

  @Delete(':id')
  @HttpCode(204)
  async remove(@CurrentAccount() account: Account, @Param('id', new UuidPipe('asset')) id: string): Promise<void> {
    await this.assets.remove(account, id);
  }

  @Get(':id/content')
  @Uncompressed()
  async content(
    @CurrentAccount() account: Account,
    @Param('id', new UuidPipe('asset')) id: string,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    const asset = await this.assets.find(account, id);
    if (this.config.surface === 'self-hosted') {
      return sendBlob(request, reply, this.store, { hash: asset.blobHash, fileName: asset.filePath, contentType: asset.contentType });
    }
    const signed = await this.assets.signedUrl(asset, request);
    return reply.status(302).header('location', signed.url).header('cache-control', 'no-store').send();
  }
}
