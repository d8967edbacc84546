import { timingSafeEqual } from 'node:crypto';
import { type CanActivate, type ExecutionContext, Inject, Injectable, createParamDecorator } from '@nestjs/common';
import { AuthGuard } from '@nestjs/passport';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import type { Account } from '#libs/db';
import { CONFIG } from '../core/tokens.js';
import { ApiKeyAuthService } from './api-key-auth.service.js';
import { SelfHostedAccount } from './self-hosted-account.js';

type AuthedRequest = FastifyRequest & { user?: Account };

const UNAUTHORIZED = () => new ApiError('unauthorized', 'Missing or invalid credentials.', undefined, { 'www-authenticate': 'Bearer' });

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * v2: an account API key as `Authorization: Bearer`, through passport. On the self-hosted surface
 * there are no accounts: requests pass as the local account, after the static token if one is set.
 */
@Injectable()
export class BearerAuthGuard extends AuthGuard('bearer') {
  constructor(
    @Inject(CONFIG) private readonly config: Config,
    private readonly selfHosted: SelfHostedAccount,
  ) {
    super();
  }

  override async canActivate(context: ExecutionContext): Promise<boolean> {
    if (this.config.surface !== 'self-hosted') return (await super.canActivate(context)) as boolean;
    const request = context.switchToHttp().getRequest<AuthedRequest>();
    const token = this.config.selfHostedToken;
    if (token) {
      const header = request.headers.authorization ?? '';
      if (!header.startsWith('Bearer ') || !sameSecret(header.slice(7), token)) throw UNAUTHORIZED();
    }
    request.user = this.selfHosted.get();
    return true;
  }

  override handleRequest<T>(err: unknown, user: T): T {
    if (err || !user) throw UNAUTHORIZED();
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
