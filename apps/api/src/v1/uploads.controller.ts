import { Readable } from 'node:stream';
import { Controller, HttpCode, Inject, Post, Req, UseGuards } from '@nestjs/common';
import type { z } from 'zod';
import type { FastifyRequest } from 'fastify';
import { guessContentType } from '#libs/assets';
import type { Config } from '#libs/config';
import { ApiError, V1MaskUploadFieldsSchema, V1UploadFieldsSchema } from '#libs/contracts';
import type { Account } from '#libs/db';
import type { BlobStore, StoredBlob } from '#libs/storage';
import { ApiKeyHeaderGuard, CurrentAccount } from '../auth/index.js';
import { BLOB_STORE, CONFIG } from '../core/tokens.js';
import { RateLimitGuard } from '../limits/index.js';
import { AssetsService, partContentType } from '../v2/assets/assets.service.js';
import { lastValues, readMultipartUpload } from '../v2/assets/multipart-upload.js';
import { parseWith } from '../contract/index.js';
import { uploadExtension } from './files/file-names.js';
import { V1Files } from './files/v1-files.service.js';
import { applyMaskAlpha, ImageDecodeError } from './images/mask.js';
import { v1Errors } from './http/engine-body.js';
import { RendersErrors } from '../http/error-renderer.js';

/** An upload's text fields, parsed by its operation's schema; a refusal is an `invalid_request` worded by the schema. */
function parseFields<T extends z.ZodType>(schema: T, fields: Map<string, string[]>): z.output<T> {
  return parseWith(schema, lastValues(fields), (issues) => ApiError.invalid(issues[0]!.message));
}

async function readAll(stream: Readable, limit: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const c of stream) {
    const chunk = Buffer.from(c as Buffer);
    size += chunk.length;
    if (size > limit) {
      stream.destroy();
      throw new ApiError('payload_too_large', `The original image is larger than ${limit} bytes.`);
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts);
}

/**
 * Uploads into the content-addressed store. The name returned is the hash of the bytes plus an
 * extension, the same for the same bytes; `subfolder` and `overwrite` are accepted and ignored.
 */
@RendersErrors(v1Errors)
@Controller('api/upload')
@UseGuards(ApiKeyHeaderGuard, RateLimitGuard)
export class V1UploadsController {
  constructor(
    private readonly assets: AssetsService,
    private readonly files: V1Files,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Post('image')
  @HttpCode(200)
  async image(@CurrentAccount() account: Account, @Req() request: FastifyRequest) {
    // A refused upload (a second image part, a field cut off) must leave no bytes behind.
    const discard = (stored: StoredBlob) => this.assets.discardUnrecorded(stored);
    const upload = await readMultipartUpload(request, 'image', (stream) => this.assets.storeBytes(stream), discard);
    const extension = uploadExtension(upload.fileName, upload.mimeType);
    const contentType = partContentType(upload.mimeType) ?? guessContentType(`x${extension}`);
    let fields: z.output<typeof V1UploadFieldsSchema>;
    let recorded: Awaited<ReturnType<V1Files['recordUpload']>>;
    try {
      fields = parseFields(V1UploadFieldsSchema, upload.fields);
      recorded = await this.files.recordUpload(account.id, upload.stored, extension, contentType);
    } catch (err) {
      await discard(upload.stored);
      throw err;
    }
    const { asset, name, created } = recorded;
    if (created) await this.assets.keepOrDrop(asset.id, upload.stored.hash);
    return { name, subfolder: '', type: fields.type ?? 'input' };
  }

  /** The engine's mask upload: the referenced original takes the mask's alpha channel. */
  @Post('mask')
  @HttpCode(200)
  async mask(@CurrentAccount() account: Account, @Req() request: FastifyRequest) {
    const limit = this.config.maxUploadBytes;
    // The mask is decoded in memory anyway, so it is read whole (the multipart limit bounds it).
    let maskBytes: Buffer | null = null;
    const upload = await readMultipartUpload(request, 'image', async (stream) => {
      maskBytes = await readAll(stream, limit);
      return { hash: '', sizeBytes: maskBytes.length, storageKey: '', created: false };
    });
    const fields = parseFields(V1MaskUploadFieldsSchema, upload.fields);
    const original = await this.files.findByReference(account.id, fields.original_ref);
    if (!original) throw new ApiError('not_found', 'The original image was not found.');
    if (Number(original.asset.blob.sizeBytes) > limit) throw new ApiError('payload_too_large', 'The original image is too large to edit.');
    const originalBytes = await readAll(await this.store.read(original.asset.blobHash), limit);
    let composed: Buffer;
    try {
      composed = applyMaskAlpha(originalBytes, maskBytes!);
    } catch (err) {
      if (err instanceof ImageDecodeError) throw ApiError.invalid(`Cannot apply the mask: ${err.message}.`);
      throw err;
    }
    const stored = await this.assets.storeBytes(Readable.from([composed]));
    const { asset, name, created } = await this.files.recordUpload(account.id, stored, '.png', 'image/png');
    if (created) await this.assets.keepOrDrop(asset.id, stored.hash);
    return { name, subfolder: '', type: fields.type ?? 'input' };
  }
}
