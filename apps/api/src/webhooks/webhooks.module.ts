import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/index.js';
import { LimitsModule } from '../limits/index.js';
import { WebhooksController } from './webhooks.controller.js';
import { WebhooksService } from './webhooks.service.js';

/** The v2 webhook routes; the webhooks process (apps/webhooks) delivers what they configure. */
@Module({
  imports: [AuthModule, LimitsModule],
  controllers: [WebhooksController],
  providers: [WebhooksService],
})
export class WebhooksModule {}
