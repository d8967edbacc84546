import type { LoggerService } from '@nestjs/common';
import type { Logger } from 'pino';

/**
 * Nest's own lines (its start-up, its errors) through the process's pino logger. Nest's `log`
 * lines (every mapped route) are debug detail here, as they were not shown at all before.
 */
export class NestPinoLogger implements LoggerService {
  constructor(private readonly logger: Logger) {}

  private line(level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal', message: unknown, params: unknown[]): void {
    const context = params.length > 0 && typeof params[params.length - 1] === 'string' ? (params[params.length - 1] as string) : undefined;
    this.logger[level]({ ...(context ? { component: context } : {}) }, typeof message === 'string' ? message : JSON.stringify(message));
  }

  log(message: unknown, ...params: unknown[]): void {
    this.line('debug', message, params);
  }

  // Nest passes (message, stack, context) for an error.
  error(message: unknown, ...params: unknown[]): void {
    const [stack, context] = params.length >= 2 ? params : [undefined, params[0]];
    this.logger.error({ ...(typeof context === 'string' ? { component: context } : {}), ...(typeof stack === 'string' ? { stack } : {}) }, typeof message === 'string' ? message : JSON.stringify(message));
  }

  warn(message: unknown, ...params: unknown[]): void {
    this.line('warn', message, params);
  }

  debug(message: unknown, ...params: unknown[]): void {
    this.line('debug', message, params);
  }

  verbose(message: unknown, ...params: unknown[]): void {
    this.line('trace', message, params);
  }

  fatal(message: unknown, ...params: unknown[]): void {
    this.line('fatal', message, params);
  }
}
