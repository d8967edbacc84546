import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { type CanActivate, type ExecutionContext, Inject, Injectable, createParamDecorator } from '@nestjs/common';
import { AuthGuard } from '@nestjs/passport';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import type { Account } from '#libs/db';
import { CONFIG } from '../core/tokens.js';
import { ApiKeyAuthService } from './api-key-auth.service.js';
import { AuthFailures, clientAddress } from './auth-failures.js';
import { SelfHostedAccount } from './self-hosted-account.js';

type AuthedRequest = FastifyRequest & { user?: Account };

const UNAUTHORIZED = () => new ApiError('unauthorized', 'Missing or invalid credentials.', undefined, { 'www-authenticate': 'Bearer' });

/** 429 before any credential is looked at, for an address that used up its failed attempts. */
async function refuseBlocked(failures: AuthFailures, source: string): Promise<void> {
  const wait = await failures.blockedFor(source);
  if (wait !== null) throw ApiError.retryAfter('rate_limited', failures.message(), wait);
}

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
    private readonly failures: AuthFailures,
  ) {
    super();
  }

  override async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthedRequest>();
    if (this.config.surface === 'self-hosted' && !this.config.selfHostedToken) {
      request.user = this.selfHosted.get();
      return true;
    }
    await refuseBlocked(this.failures, request.ip);
    try {
      return await this.authenticate(context, request);
    } catch (err) {
      const refused = err instanceof ApiError && err.code === 'unauthorized';
      if (refused && request.headers.authorization !== undefined) await this.failures.failed(request.ip);
      throw err;
    }
  }

  private async authenticate(context: ExecutionContext, request: AuthedRequest): Promise<boolean> {
    if (this.config.surface !== 'self-hosted') return (await super.canActivate(context)) as boolean;
    const header = request.headers.authorization ?? '';
    if (!header.startsWith('Bearer ') || !sameSecret(header.slice(7), this.config.selfHostedToken)) throw UNAUTHORIZED();
    request.user = this.selfHosted.get();
    return true;
  }

  override handleRequest<T>(err: unknown, user: T): T {
    // An error here comes from the key lookup (the database), not from the credential: it must
    // not read as a wrong key, nor count against the client's address.
    if (err) throw err;
    if (!user) throw UNAUTHORIZED();
    return user;
  }
}

/** v1 REST: the same key in `X-API-Key`. */
@Injectable()
export class ApiKeyHeaderGuard implements CanActivate {
  constructor(
    private readonly keys: ApiKeyAuthService,
    private readonly failures: AuthFailures,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthedRequest>();
    await refuseBlocked(this.failures, request.ip);
    const header = request.headers['x-api-key'];
    const account = await this.keys.authenticate(Array.isArray(header) ? header[0] : header);
    if (!account) {
      if (header !== undefined) await this.failures.failed(request.ip);
      throw new ApiError('unauthorized', 'Missing or invalid API key.');
    }
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

/**
 * The v1 WebSocket authenticates before the upgrade, outside Nest's guards: the same key, the
 * same brute-force guard (the client address computed as Fastify would), the same errors.
 */
@Injectable()
export class UpgradeAuth {
  constructor(
    private readonly keys: ApiKeyAuthService,
    private readonly failures: AuthFailures,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  async authenticate(request: IncomingMessage): Promise<Account> {
    const source = clientAddress(request, this.config.api.trustProxyHops);
    await refuseBlocked(this.failures, source);
    const key = keyFromUpgrade(request);
    const account = await this.keys.authenticate(key);
    if (!account) {
      if (key) await this.failures.failed(source);
      throw new ApiError('unauthorized', 'Missing or invalid API key: pass ?token= or X-API-Key.');
    }
    return account;
  }
}
