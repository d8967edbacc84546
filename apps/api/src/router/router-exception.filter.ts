import { type ArgumentsHost, Catch, type ExceptionFilter, Inject } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { componentLogger } from '#libs/logging';
import { CONFIG } from '../core/tokens.js';
import { clientHungUp, sendError, toErrorShape } from '../http/error-body.js';
import { RouterError, RouterValidationError } from './errors.js';

/** Router errors leave as RouterErrorResponse (or the 422 validation body); the rest as the app maps them. */
@Catch()
export class RouterExceptionFilter implements ExceptionFilter {
  private readonly logger = componentLogger('Router');

  constructor(@Inject(CONFIG) private readonly config: Config) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const request = http.getRequest<FastifyRequest>();
    const reply = http.getResponse<FastifyReply>();
    if (reply.sent || reply.raw.headersSent) {
      reply.raw.destroy();
      return;
    }
    if (exception instanceof RouterValidationError) {
      void reply.status(422).type('application/json; charset=utf-8').header('x-service-error-type', exception.bucket).send({ detail: exception.entries });
      return;
    }
    if (exception instanceof RouterError) {
      for (const [name, value] of Object.entries(exception.headers)) reply.header(name, value);
      void reply
        .status(exception.status)
        .type('application/json; charset=utf-8')
        .header('x-service-error-type', exception.bucket)
        .send({ detail: exception.detail, error_type: exception.bucket });
      return;
    }
    const shape = toErrorShape(exception);
    if (shape.unexpected && clientHungUp(request, exception)) {
      reply.raw.destroy();
      return;
    }
    if (shape.unexpected) this.logger.error(`unexpected router error: ${(exception as Error)?.stack ?? String(exception)}`);
    sendError(request, reply, shape, this.config.api.basePath);
  }
}
