import { Inject, Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import type { Config } from '#libs/config';
import { CONFIG } from '../core/tokens.js';
import { ProviderGateway } from './adapters/index.js';
import { CallsService } from './calls/calls.service.js';
import { DispatchService } from './calls/dispatch.service.js';
import { KeyedRetriesService } from './calls/keyed-retries.service.js';
import { SettlementService } from './calls/settlement.service.js';
import { UsageService } from './calls/usage.service.js';
import { RouterCreditsService } from './credits/router-credits.service.js';
import { MediaRehostService } from './media/media-rehost.service.js';
import { CatalogService } from './catalog/catalog.service.js';
import { LimitsService } from './limits/limits.service.js';
import { installRouterHooks } from './request-context.js';
import { RouterAuthGuard, RouterAuthService } from './router-auth.js';
import { RouterController } from './router.controller.js';
import { routerErrors } from './router-errors.js';

/** The model router: catalog, per-model schemas and synchronous partner calls under /v1/models. */
@Module({
  controllers: [RouterController],
  providers: [
    CatalogService,
    CallsService,
    DispatchService,
    KeyedRetriesService,
    SettlementService,
    UsageService,
    LimitsService,
    RouterCreditsService,
    ProviderGateway,
    MediaRehostService,
    RouterAuthService,
    RouterAuthGuard,
  ],
})
export class RouterModule implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(CONFIG) private readonly config: Config,
    private readonly guard: RouterAuthGuard,
  ) {}

  onModuleInit(): void {
    installRouterHooks(this.adapterHost.httpAdapter.getInstance<FastifyInstance>(), this.config.api.basePath, routerErrors, (request, startedAt) => this.guard.recordCut(request, startedAt));
  }
}
