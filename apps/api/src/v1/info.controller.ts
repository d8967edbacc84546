import { Controller, Get, HttpCode, Inject, Param, Post, UseGuards } from '@nestjs/common';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import type { Account } from '#libs/db';
import { ApiKeyHeaderGuard, CurrentAccount } from '../auth/index.js';
import { CONFIG } from '../core/tokens.js';
import { JobPipeline } from '../jobs/job-pipeline.js';
import { SubmissionService } from '../jobs/submission.service.js';
import { RateLimitGuard } from '../limits/index.js';
import { InputFiles } from '../inputs/input-files.service.js';

/** What clients read when they connect: node definitions, models, features, system stats. */
@Controller('api')
@UseGuards(ApiKeyHeaderGuard, RateLimitGuard)
export class V1InfoController {
  constructor(
    @Inject(CONFIG) private readonly config: Config,
    private readonly submissions: SubmissionService,
    private readonly inputs: InputFiles,
    private readonly pipeline: JobPipeline,
  ) {}

  @Get('object_info')
  async objectInfo(@CurrentAccount() account: Account) {
    return this.inputs.definitionsFor(account.id, await this.submissions.definitions());
  }

  /** One class, or `{}` for an unknown one, as the engine answers (clients probe for extensions this way). */
  @Get('object_info/:cls')
  async objectInfoOf(@CurrentAccount() account: Account, @Param('cls') cls: string) {
    const defs = await this.submissions.definitions();
    if (!Object.hasOwn(defs, cls)) return {};
    const mine = await this.inputs.definitionsFor(account.id, { [cls]: defs[cls]! });
    return { [cls]: mine[cls] };
  }

  @Get('embeddings')
  async embeddings() {
    return (await this.engineModels()).embeddings;
  }

  /** Front-end extension scripts: the service serves no front end, so there are none. */
  @Get('extensions')
  extensions() {
    return [];
  }

  @Get('models')
  async modelFolders() {
    return Object.keys((await this.engineModels()).folders);
  }

  @Get('models/:folder')
  async models(@Param('folder') folder: string) {
    const { folders } = await this.engineModels();
    if (!Object.hasOwn(folders, folder)) throw ApiError.notFound('model folder');
    return folders[folder];
  }

  /** As the engines last reported them; like node definitions, unavailable until one has. */
  private async engineModels() {
    const models = await this.pipeline.models.get();
    if (models) return models;
    throw new ApiError('service_unavailable', 'No engine has reported its models yet; retry shortly.', undefined, { 'retry-after': '5' });
  }

  @Get('features')
  features() {
    return { supports_preview_metadata: true, max_upload_size: this.config.maxUploadBytes };
  }

  /**
   * The engine unloads its models and empties its caches here (the frontend's "unload models").
   * The engines serve every account, so no caller may empty them: the engine's answer, no effect.
   */
  @Post('free')
  @HttpCode(200)
  free(): void {}

  /** The engines are behind the service: no host facts to report, only the shape clients read. */
  @Get('system_stats')
  systemStats() {
    return {
      system: {
        os: 'posix',
        ram_total: 0,
        ram_free: 0,
        comfyui_version: '0.3.64',
        required_frontend_version: '',
        installed_templates_version: null,
        required_templates_version: '',
        python_version: '',
        pytorch_version: '',
        embedded_python: false,
        argv: [],
      },
      devices: [],
    };
  }
}
