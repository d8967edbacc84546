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

type Headers = Record<string, string | string[] | undefined>;

function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The credential of `Authorization: Bearer <token>`; the scheme name in any case (RFC 7235), as passport reads it. */
export function bearerToken(headers: Headers): string | undefined {
  const match = /^bearer +(\S+) *$/i.exec(firstHeader(headers.authorization) ?? '');
  return match ? match[1] : undefined;
}

/**
 * The self-hosted surface has no accounts: every request acts as the local account. With no static
 * token configured nothing is checked (and so nothing counts as a failed attempt); with one, the
 * token is the only credential. One rule for v2, v1 REST and the v1 WebSocket.
 */
@Injectable()
export class SelfHostedGate {
  constructor(
    @Inject(CONFIG) private readonly config: Config,
    private readonly selfHosted: SelfHostedAccount,
  ) {}

  /** True when this surface authenticates by the static token instead of account keys. */
  get active(): boolean {
    return this.config.surface === 'self-hosted';
  }

  /** The local account when no token is configured: there is nothing to check. */
  openAccount(): Account | null {
    return this.active && !this.config.selfHostedToken ? this.selfHosted.get() : null;
  }

  /** The local account when one of the presented credentials is the static token. */
  accept(presented: Array<string | null | undefined>): Account | null {
    const token = this.config.selfHostedToken;
    return presented.some((p) => p && sameSecret(p, token)) ? this.selfHosted.get() : null;
  }
}

/** v2: an account API key as `Authorization: Bearer`, through passport; the static token on self-hosted. */
@Injectable()
export class BearerAuthGuard extends AuthGuard('bearer') {
  constructor(
    private readonly selfHosted: SelfHostedGate,
    private readonly failures: AuthFailures,
  ) {
    super();
  }

  override async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthedRequest>();
    const open = this.selfHosted.openAccount();
    if (open) {
      request.user = open;
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
    if (!this.selfHosted.active) return (await super.canActivate(context)) as boolean;
    const account = this.selfHosted.accept([bearerToken(request.headers)]);
    if (!account) throw UNAUTHORIZED();
    request.user = account;
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

/** v1 REST: the same key in `X-API-Key`; on self-hosted, the static token there or as `Authorization: Bearer`. */
@Injectable()
export class ApiKeyHeaderGuard implements CanActivate {
  constructor(
    private readonly keys: ApiKeyAuthService,
    private readonly failures: AuthFailures,
    private readonly selfHosted: SelfHostedGate,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthedRequest>();
    const open = this.selfHosted.openAccount();
    if (open) {
      request.user = open;
      return true;
    }
    await refuseBlocked(this.failures, request.ip);
    const key = firstHeader(request.headers['x-api-key']);
    const bearer = this.selfHosted.active ? bearerToken(request.headers) : undefined;
    const account = this.selfHosted.active ? this.selfHosted.accept([key, bearer]) : await this.keys.authenticate(key);
    if (!account) {
      // Only a presented credential is a guess worth counting, as on v2.
      if (key !== undefined || bearer !== undefined) await this.failures.failed(request.ip);
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
export function keyFromUpgrade(request: { url?: string; headers: Headers }): string | null {
  const header = request.headers['x-api-key'];
  if (typeof header === 'string' && header) return header;
  const url = new URL(request.url ?? '/', 'http://localhost');
  return url.searchParams.get('token');
}

/**
 * The v1 WebSocket authenticates before the upgrade, outside Nest's guards: the same key (or the
 * self-hosted token, also as `Authorization: Bearer`), the same brute-force guard (the client
 * address computed as Fastify would), the same errors.
 */
@Injectable()
export class UpgradeAuth {
  constructor(
    private readonly keys: ApiKeyAuthService,
    private readonly failures: AuthFailures,
    private readonly selfHosted: SelfHostedGate,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  async authenticate(request: IncomingMessage): Promise<Account> {
    const open = this.selfHosted.openAccount();
    if (open) return open;
    const source = clientAddress(request, this.config.api.trustProxyHops);
    await refuseBlocked(this.failures, source);
    const key = keyFromUpgrade(request);
    const bearer = this.selfHosted.active ? bearerToken(request.headers) : undefined;
    const account = this.selfHosted.active ? this.selfHosted.accept([key, bearer]) : await this.keys.authenticate(key);
    if (!account) {
      if (key || bearer !== undefined) await this.failures.failed(source);
      throw new ApiError('unauthorized', 'Missing or invalid API key: pass ?token= or X-API-Key.');
    }
    return account;
  }
}
