import { Module } from '@nestjs/common';
import { JobsCoreModule } from '../jobs/jobs-core.module.js';
import { ApiMetrics } from './api-metrics.js';
import { MetricsController } from './metrics.controller.js';

/** `/metrics` on the api. HTTP latency is observed by a Fastify hook (http/fastify-setup.ts). */
@Module({
  imports: [JobsCoreModule],
  controllers: [MetricsController],
  providers: [ApiMetrics],
})
export class MetricsModule {}
