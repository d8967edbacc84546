import { Controller, Get, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ApiMetrics } from './api-metrics.js';

/** Prometheus scrape endpoint. Operational, not part of the tenant API, so not in the OpenAPI document. */
@ApiExcludeController()
@Controller()
export class MetricsController {
  constructor(private readonly api: ApiMetrics) {}

  @Get('metrics')
  async metrics(@Res() reply: FastifyReply): Promise<void> {
    const body = await this.api.metrics.render();
    await reply.status(200).header('cache-control', 'no-store').type(this.api.metrics.contentType).send(body);
  }
}
