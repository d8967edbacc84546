import { Controller, Get, Inject, Param, Query, UseGuards } from '@nestjs/common';
import { ApiError, V1ViewMetadataQuerySchema } from '#libs/contracts';
import type { Account, Db } from '#libs/db';
import type { BlobStore } from '#libs/storage';
import { ApiKeyHeaderGuard, CurrentAccount } from '../../auth/index.js';
import { parseWith } from '../../contract/index.js';
import { BLOB_STORE, DB } from '../../core/tokens.js';
import { InputFiles } from '../../inputs/input-files.service.js';
import { RateLimitGuard } from '../../limits/index.js';
import { AccountModels } from './model-lists.js';
import { safetensorsMetadata } from './safetensors-header.js';
import { v1Errors } from '../http/engine-body.js';
import { RendersErrors } from '../../http/error-renderer.js';

/** Folders the engine's `/experiment/models` leaves out (app/model_manager.py). */
const NOT_MODEL_FOLDERS = new Set(['configs', 'custom_nodes']);

/**
 * The engine's model routes (server.py, app/model_manager.py) over the account's model lists.
 * No engine path is ever shown: the engines' folders are theirs, so folder paths are empty lists.
 */
@RendersErrors(v1Errors)
@Controller('api')
@UseGuards(ApiKeyHeaderGuard, RateLimitGuard)
export class V1ModelsController {
  constructor(
    private readonly models: AccountModels,
    private readonly inputs: InputFiles,
    @Inject(DB) private readonly db: Db,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
  ) {}

  @Get('embeddings')
  async embeddings(@CurrentAccount() account: Account) {
    return (await this.models.of(account)).embeddings;
  }

  @Get('models')
  async modelFolders(@CurrentAccount() account: Account) {
    return Object.keys((await this.models.of(account)).folders);
  }

  @Get('models/:folder')
  async modelFiles(@CurrentAccount() account: Account, @Param('folder') folder: string) {
    return this.filesOf(account, folder);
  }

  /** `[{name, folders}]`, the front end's model library; `folders` would be engine paths. */
  @Get('experiment/models')
  async experimentFolders(@CurrentAccount() account: Account) {
    const { folders } = await this.models.of(account);
    return Object.keys(folders)
      .filter((name) => !NOT_MODEL_FOLDERS.has(name))
      .map((name) => ({ name, folders: [] as string[] }));
  }

  /** `[{name, pathIndex}]`; the engine adds file times and sizes, which the engines do not report. */
  @Get('experiment/models/:folder')
  async experimentFiles(@CurrentAccount() account: Account, @Param('folder') folder: string) {
    return (await this.filesOf(account, folder)).map((name) => ({ name, pathIndex: 0 }));
  }

  /**
   * A safetensors model's `__metadata__`. The engine answers 404 for a name that is not a
   * `.safetensors` file of the folder and for one without metadata. The account's own files are
   * read here (their header only); the engines report no headers of theirs, so a shared model is
   * one without: 404, after the same checks.
   */
  @Get('view_metadata/:folder')
  async viewMetadata(@CurrentAccount() account: Account, @Param('folder') folder: string, @Query() query: unknown) {
    const { filename } = parseWith(V1ViewMetadataQuerySchema, query, (issues) => new ApiError('not_found', issues[0]!.message));
    if (!(await this.filesOf(account, folder)).includes(filename)) throw ApiError.notFound('model');
    const own = (await this.inputs.models(account.id)).find(folder, filename);
    const asset = own ? await this.db.asset.findUnique({ where: { id: own.assetId }, select: { blobHash: true } }) : null;
    const metadata = asset ? await safetensorsMetadata(this.store, asset.blobHash) : null;
    if (!metadata) throw new ApiError('not_found', 'No metadata is known for this model.');
    return metadata;
  }

  private async filesOf(account: Account, folder: string): Promise<string[]> {
    const { folders } = await this.models.of(account);
    if (!Object.hasOwn(folders, folder)) throw ApiError.notFound('model folder');
    return folders[folder]!;
  }
}
