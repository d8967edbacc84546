import { type CanActivate, type ExecutionContext, Injectable, createParamDecorator } from '@nestjs/common';
import { AuthGuard } from '@nestjs/passport';
import type { FastifyRequest } from 'fastify';
import { ApiError } from '#libs/contracts';
import type { Account } from '#libs/db';
import { ApiKeyAuthService } from './api-key-auth.service.js';

type AuthedRequest = FastifyRequest & { user?: Account };

/** v2: bearer API key through passport. */
@Injectable()
export class BearerAuthGuard extends AuthGuard('bearer') {
  override handleRequest<T>(err: unknown, user: T): T {
    if (err || !user) throw new ApiError('unauthorized', 'Missing or invalid credentials.');
    return user;
  }
}

/** v1 REST: the same key in `X-API-Key`. */
@Injectable()
export class ApiKeyHeaderGuard implements CanActivate {
  constructor(private readonly keys: ApiKeyAuthService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthedRequest>();
    const header = request.headers['x-api-key'];
    const account = await this.keys.authenticate(Array.isArray(header) ? header[0] : header);
    if (!account) throw new ApiError('unauthorized', 'Missing or invalid API key.');
    request.user = account;
    return true;
  }
}

/** The authenticated account of the request. */
export const CurrentAccount = createParamDecorator((_: unknown, context: ExecutionContext): Account => {
  const account = context.switchToHttp().getRequest<AuthedRequest>().user;
  if (!account) throw new ApiError('unauthorized', 'Missing or invalid credentials.');
  return account;
});

/** For the v1 WebSocket: the key from `?token=` or the upgrade request's `X-API-Key`. */
export function keyFromUpgrade(request: { url?: string; headers: Record<string, string | string[] | undefined> }): string | null {
  const header = request.headers['x-api-key'];
  if (typeof header === 'string' && header) return header;
  const url = new URL(request.url ?? '/', 'http://localhost');
  return url.searchParams.get('token');
}
