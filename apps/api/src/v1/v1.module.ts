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
import { EngineViews } from './jobs/engine-views.js';
import { V1PromptsController } from './prompts.controller.js';
import { V1UploadsController } from './uploads.controller.js';
import { V1ViewController } from './view.controller.js';
import { V1SocketServer } from './ws/v1-socket.server.js';

/** The deprecated v1 API: the engine's own HTTP and WebSocket surface, multi-tenant. */
@Module({
  imports: [AuthModule, JobsCoreModule, AssetsModule],
  controllers: [V1InfoController, V1UploadsController, V1PromptsController, V1ViewController],
  providers: [V1Files, EngineViews, V1SocketServer],
})
export class V1Module implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    acceptAnyJsonBody(fastify, this.config.api.basePath, ['/api/prompt', '/api/queue', '/api/interrupt', '/api/history', '/api/free']);
  }
}
