import { type ArgumentsHost, Catch, type ExceptionFilter } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { clientHungUp, toErrorShape } from './error-body.js';
import { sendError } from './error-renderer.js';

/**
 * The one global filter: whatever is thrown leaves in the shape of the surface that serves the
 * request (its renderer, from the route's metadata; see error-renderer.ts).
 */
@Catch()
export class AllErrorsFilter implements ExceptionFilter {
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
    sendError(request, reply, shape, exception);
  }
}
