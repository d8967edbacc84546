import { type ArgumentsHost, Catch, type ExceptionFilter, Inject } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { CONFIG } from '../core/tokens.js';
import { clientHungUp, sendError, toErrorShape } from './error-body.js';

/** The one global filter: whatever is thrown leaves in the contract's error shape. */
@Catch()
export class AllErrorsFilter implements ExceptionFilter {
  constructor(@Inject(CONFIG) private readonly config: Config) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const request = http.getRequest<FastifyRequest>();
    const reply = http.getResponse<FastifyReply>();
    const shape = toErrorShape(exception);
    if (shape.unexpected && clientHungUp(request, exception)) {
      request.log.debug({ err: exception }, 'client hung up mid-request');
      reply.raw.destroy();
      return;
    }
    if (shape.unexpected) request.log.error({ err: exception }, 'unexpected error');
    if (reply.sent || reply.raw.headersSent) {
      reply.raw.destroy();
      return;
    }
    sendError(request, reply, shape, this.config.api.basePath);
  }
}
