import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query, Req, UseGuards } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Account } from '#libs/db';
import { BearerAuthGuard, CurrentAccount } from '../auth/index.js';
import { requireJsonObject } from '../http/json-body.js';
import { RateLimitGuard } from '../limits/index.js';
import { pageOf } from '../v2/paging.js';
import { parseEndpointInput, parseEndpointPatch } from './endpoint-body.js';
import { deliveryView, endpointView } from './views.js';
import { WebhooksService } from './webhooks.service.js';
import { envelopeErrors, RendersErrors } from '../http/error-renderer.js';

/** v2 webhook endpoints of the caller's account, and their deliveries (docs/api.md, "Webhooks"). */
@RendersErrors(envelopeErrors)
@Controller('api/v2/webhooks')
@UseGuards(BearerAuthGuard, RateLimitGuard)
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Post('endpoints')
  @HttpCode(201)
  async create(@CurrentAccount() account: Account, @Body() body: unknown, @Req() request: FastifyRequest) {
    const input = parseEndpointInput(requireJsonObject(request, body), this.webhooks.urlRules);
    const { endpoint, secret } = await this.webhooks.create(account.id, input);
    return endpointView(endpoint, secret);
  }

  @Get('endpoints')
  async list(@CurrentAccount() account: Account, @Query() query: Record<string, unknown>) {
    const q = this.webhooks.parsePage(query, account.id);
    const rows = await this.webhooks.list(account.id, q);
    return pageOf(rows, q.limit, rows.slice(0, q.limit).map((e) => endpointView(e)), (last) => this.webhooks.endpointCursor(account.id, last));
  }

  @Get('endpoints/:id')
  async get(@CurrentAccount() account: Account, @Param('id') id: string) {
    return endpointView(await this.webhooks.find(account.id, id));
  }

  @Patch('endpoints/:id')
  async update(@CurrentAccount() account: Account, @Param('id') id: string, @Body() body: unknown, @Req() request: FastifyRequest) {
    await this.webhooks.find(account.id, id);
    const patch = parseEndpointPatch(requireJsonObject(request, body), this.webhooks.urlRules);
    return endpointView(await this.webhooks.update(account.id, id, patch));
  }

  @Delete('endpoints/:id')
  @HttpCode(204)
  async remove(@CurrentAccount() account: Account, @Param('id') id: string): Promise<void> {
    await this.webhooks.remove(account.id, id);
  }

  @Post('endpoints/:id/rotate-secret')
  @HttpCode(200)
  async rotate(@CurrentAccount() account: Account, @Param('id') id: string) {
    const { endpoint, secret } = await this.webhooks.rotate(account.id, id);
    return endpointView(endpoint, secret);
  }

  @Post('endpoints/:id/test')
  @HttpCode(202)
  async test(@CurrentAccount() account: Account, @Param('id') id: string) {
    return deliveryView(await this.webhooks.test(account.id, id));
  }

  @Get('endpoints/:id/deliveries')
  async deliveries(@CurrentAccount() account: Account, @Param('id') id: string, @Query() query: Record<string, unknown>) {
    const q = this.webhooks.parseDeliveryPage(query, account.id);
    const rows = await this.webhooks.deliveries(account.id, id, q);
    return pageOf(rows, q.limit, rows.slice(0, q.limit).map(deliveryView), (last) => this.webhooks.deliveryCursor(account.id, last));
  }

  @Post('deliveries/:id/redeliver')
  @HttpCode(202)
  async redeliver(@CurrentAccount() account: Account, @Param('id') id: string) {
    return deliveryView(await this.webhooks.redeliver(account.id, id));
  }
}
