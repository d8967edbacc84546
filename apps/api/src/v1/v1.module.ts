import { Inject, Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import type { Config } from '#libs/config';
import { AuthModule } from '../auth/index.js';
import { CONFIG } from '../core/tokens.js';
import { JobsCoreModule } from '../jobs/jobs-core.module.js';
import { AssetsModule } from '../v2/assets/assets.module.js';
import { V1Files } from './files/v1-files.service.js';
import { acceptAnyJsonBody } from './http/engine-body.js';
import { V1InfoController } from './info.controller.js';
import { V1InternalController } from './internal/internal.controller.js';
import { TenantLogs } from './internal/tenant-logs.service.js';
import { EngineViews } from './jobs/engine-views.js';
import { AccountModels } from './models/model-lists.js';
import { V1ModelsController } from './models/models.controller.js';
import { V1PromptsController } from './prompts.controller.js';
import { V1TemplatesController } from './templates/templates.controller.js';
import { V1UploadsController } from './uploads.controller.js';
import { installEngineBodies } from './userdata/request-bodies.js';
import { V1SettingsController } from './userdata/settings.controller.js';
import { UserFiles } from './userdata/user-files.service.js';
import { V1UserDataController } from './userdata/userdata.controller.js';
import { V1ViewController } from './view.controller.js';
import { V1SocketServer } from './ws/v1-socket.server.js';

/** The deprecated v1 API: the engine's own HTTP and WebSocket surface, multi-tenant. */
@Module({
  imports: [AuthModule, JobsCoreModule, AssetsModule],
  controllers: [
    V1InfoController,
    V1ModelsController,
    V1UploadsController,
    V1PromptsController,
    V1ViewController,
    V1UserDataController,
    V1SettingsController,
    V1TemplatesController,
    V1InternalController,
  ],
  providers: [V1Files, EngineViews, V1SocketServer, AccountModels, UserFiles, TenantLogs],
})
export class V1Module implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    acceptAnyJsonBody(fastify, this.config.api.basePath, ['/api/prompt', '/api/queue', '/api/interrupt', '/api/history', '/api/free']);
    installEngineBodies(fastify, this.config.api.basePath, this.config.userdata.maxFileBytes);
  }
}
