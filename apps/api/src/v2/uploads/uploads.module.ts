import { Inject, Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import type { Config } from '#libs/config';
import { AuthModule } from '../../auth/index.js';
import { CONFIG } from '../../core/tokens.js';
import { LimitsModule } from '../../limits/index.js';
import { AssetsModule } from '../assets/assets.module.js';
import { ResumableUploads } from './resumable-uploads.service.js';
import { UploadsController } from './uploads.controller.js';
import { passUploadBodiesThrough } from './web-exchange.js';

@Module({
  imports: [AuthModule, LimitsModule, AssetsModule],
  controllers: [UploadsController],
  providers: [ResumableUploads],
})
export class UploadsModule implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  onModuleInit(): void {
    passUploadBodiesThrough(this.adapterHost.httpAdapter.getInstance<FastifyInstance>(), `${this.config.api.basePath}/api/v2/uploads`);
  }
}
