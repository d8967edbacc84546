import { type DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import type { Config } from '#libs/config';
import { AuthModule } from './auth/index.js';
import { BlobsController } from './blobs/blobs.controller.js';
import { CoreModule } from './core/core.module.js';
import { HealthController } from './health/health.controller.js';
import { RouterModule } from './router/index.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { AllErrorsFilter } from './http/exception.filter.js';
import { AccountModule } from './v2/account/account.module.js';
import { AssetsModule } from './v2/assets/assets.module.js';
import { JobsModule } from './v2/jobs/jobs.module.js';
import { UploadsModule } from './v2/uploads/uploads.module.js';
import { V1Module } from './v1/v1.module.js';
import { WebhooksModule } from './webhooks/webhooks.module.js';

@Module({})
export class AppModule {
  static forConfig(config: Config): DynamicModule {
    return {
      module: AppModule,
      imports: [CoreModule.forConfig(config), AuthModule, AssetsModule, UploadsModule, AccountModule, JobsModule, WebhooksModule, V1Module, RouterModule, MetricsModule],
      controllers: [HealthController, BlobsController],
      providers: [{ provide: APP_FILTER, useClass: AllErrorsFilter }],
    };
  }
}
