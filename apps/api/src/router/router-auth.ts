import { type CanActivate, type ExecutionContext, Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { looksLikeApiKey, RouterTokenError, verifyRouterToken } from '#libs/auth';
import type { Config } from '#libs/config';
import type { Account, Db } from '#libs/db';
import { ApiKeyAuthService, AuthFailures, authChangedChannel } from '../auth/index.js';
import { CONFIG, DB } from '../core/tokens.js';
import { UsageService } from './calls/usage.service.js';
import { RouterCreditsService } from './credits/router-credits.service.js';
import { BUCKET_STATUS, RouterError } from './errors.js';
import { modelPathSegments, serviceRequestId } from './request-context.js';

// Router credentials are JWTs (`sub` = account id). Verified tokens and accounts are cached for a
// moment to keep every call off the database; the admin command line's "auth changed" message
// empties the account cache on every replica at once. Each account the cache reads is shown to
// the router's credits (RouterCreditsService), which lowers its balance by the charges this
// replica holds that the read cannot contain yet.

const TOKEN_CACHE_MS = 60_000;
// Fresh for 2 s; after that still served (at most 30 s old) while one reload runs behind it, so
// calls never queue on the database for a workspace this replica already knows.
const ACCOUNT_FRESH_MS = 2_000;
const ACCOUNT_STALE_MS = 30_000;
const MAX_ENTRIES = 10_000;

interface CachedAccount {
  account: Account | null;
  at: number;
  reload: Promise<Account | null> | null;
}

const WORKSPACE = Symbol('routerWorkspace');
type WorkspaceRequest = FastifyRequest & { [WORKSPACE]?: Account };

/** A verified token's `exp` (every router token has one) in epoch ms. */
function tokenExpiryMs(token: string): number {
  try {
    const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof payload.exp === 'number' ? payload.exp * 1000 : 0;
  } catch {
    return 0;
  }
}

@Injectable()
export class RouterAuthService implements OnModuleInit, OnApplicationShutdown {
  private readonly tokens = new Map<string, { sub: string; until: number }>();
  private readonly accounts = new Map<string, CachedAccount>();
  private subscriber: Redis | null = null;
  // Set apart from the constructor's dependencies: a page signed in with an account's API key (the
  // console) calls the router with that key, told apart from a JWT by its shape.
  @Inject(ApiKeyAuthService) private readonly apiKeys!: ApiKeyAuthService;

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
    private readonly credits: RouterCreditsService,
  ) {}

  onModuleInit(): void {
    this.subscriber = new Redis(this.config.redisUrl, { maxRetriesPerRequest: null });
    this.subscriber.on('message', () => this.accounts.clear());
    this.subscriber.on('ready', () => this.accounts.clear());
    this.subscriber.on('error', () => undefined);
    // Not awaited: the subscription is made (and remade) whenever Redis is reachable.
    this.subscriber.subscribe(authChangedChannel(this.config.redisPrefix)).catch(() => undefined);
  }

  // Closed only once the HTTP server has drained: requests in flight during a stop still use it.
  onApplicationShutdown(): void {
    this.subscriber?.disconnect();
  }

  /** The workspace of an `Authorization: Bearer <JWT or account API key>` header; throws `unauthorized`. */
  async authenticate(header: string | undefined): Promise<Account> {
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match) throw new RouterError('unauthorized', 'Send a router token as Authorization: Bearer <JWT>.');
    const token = match[1]!;
    if (looksLikeApiKey(token)) {
      // The same workspace, and the same entitlement checks, as a token naming its account.
      const keyed = await this.apiKeys.authenticate(token);
      const account = keyed && (await this.account(keyed.id, Date.now()));
      if (!account) throw new RouterError('unauthorized', 'The API key is invalid or revoked.');
      return account;
    }
    const now = Date.now();
    let sub = this.tokens.get(token);
    if (!sub || sub.until <= now) {
      try {
        const accountId = await verifyRouterToken(token, { secret: this.config.router.jwtSecret, publicKeys: this.config.router.jwtPublicKeys, maxLifetimeSeconds: this.config.router.tokenMaxLifetimeSeconds });
        sub = { sub: accountId, until: Math.min(now + TOKEN_CACHE_MS, tokenExpiryMs(token)) };
      } catch (err) {
        if (err instanceof RouterTokenError) throw new RouterError('unauthorized', 'The router token is invalid or expired.');
        throw err;
      }
      if (this.tokens.size >= MAX_ENTRIES) this.tokens.clear();
      this.tokens.set(token, sub);
    }
    const account = await this.account(sub.sub, now);
    if (!account) throw new RouterError('unauthorized', 'The router token names no workspace.');
    return account;
  }

  private async account(id: string, now: number): Promise<Account | null> {
    const cached = this.accounts.get(id);
    if (cached && now - cached.at < ACCOUNT_FRESH_MS) return cached.account;
    if (cached && now - cached.at < ACCOUNT_STALE_MS) {
      void this.load(id, cached).catch(() => undefined);
      return cached.account;
    }
    return this.load(id, cached);
  }

  private load(id: string, cached: CachedAccount | undefined): Promise<Account | null> {
    if (cached?.reload) return cached.reload;
    const entry: CachedAccount = cached ?? { account: null, at: 0, reload: null };
    const readStartedAt = Date.now();
    const reload = (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id) ? this.db.account.findUnique({ where: { id } }) : Promise.resolve(null))
      .then((account) => {
        if (account) this.credits.observed(account, readStartedAt);
        entry.account = account;
        entry.at = Date.now();
        return account;
      })
      .finally(() => {
        entry.reload = null;
      });
    entry.reload = reload;
    if (!cached) {
      if (this.accounts.size >= MAX_ENTRIES) this.accounts.clear();
      this.accounts.set(id, entry);
      // A failed first load must not stay cached as "no such workspace".
      reload.catch(() => this.accounts.delete(id));
    }
    return reload;
  }
}

/** Every router route: a valid token, a workspace that exists, is active and has the router on. */
@Injectable()
export class RouterAuthGuard implements CanActivate {
  constructor(
    private readonly auth: RouterAuthService,
    private readonly failures: AuthFailures,
    private readonly usage: UsageService,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const startedAt = Date.now();
    const request = context.switchToHttp().getRequest<WorkspaceRequest>();
    // The API's brute-force guard: an address that used up its failed attempts waits out the window.
    const wait = await this.failures.blockedFor(request.ip);
    if (wait !== null) throw new RouterError('rate_limited', this.failures.message(), { 'retry-after': String(wait) });
    let account: Account;
    try {
      account = await this.auth.authenticate(request.headers.authorization);
    } catch (err) {
      if (err instanceof RouterError && err.bucket === 'unauthorized' && request.headers.authorization !== undefined) await this.failures.failed(request.ip);
      throw err;
    }
    const refusal = refusalOf(account);
    if (refusal) {
      // A refused call of a known workspace is still a call, with its usage and audit record. (A
      // refusal without a workspace has none: the record belongs to one.)
      if (request.method === 'POST') {
        const modelId = modelPathSegments(request).join('/').slice(0, 300);
        this.usage.recordUndispatched({ id: serviceRequestId(request), accountId: account.id, modelId, outcome: refusal.bucket, httpStatus: refusal.status, startedAt });
      }
      throw refusal;
    }
    request[WORKSPACE] = account;
    return true;
  }

  /**
   * A call whose caller left while sending its body never reaches this guard, yet its workspace
   * ran a call: recorded as `client_disconnected` when its token names a workspace.
   */
  recordCut(request: FastifyRequest, startedAt: number): void {
    this.auth.authenticate(request.headers.authorization).then(
      (account) => {
        const modelId = modelPathSegments(request).join('/').slice(0, 300);
        this.usage.recordUndispatched({ id: serviceRequestId(request), accountId: account.id, modelId, outcome: 'client_disconnected', httpStatus: BUCKET_STATUS.client_disconnected, startedAt });
      },
      () => undefined, // no workspace, no record: a record belongs to one
    );
  }
}

function refusalOf(account: Account): RouterError | null {
  if (!account.routerEnabled) return new RouterError('not_enabled', 'The router is not enabled for this workspace.');
  if (account.status !== 'active') return new RouterError('forbidden', 'This workspace is inactive.');
  return null;
}

export function workspaceOf(request: FastifyRequest): Account {
  const account = (request as WorkspaceRequest)[WORKSPACE];
  if (!account) throw new RouterError('unauthorized', 'Send a router token as Authorization: Bearer <JWT>.');
  return account;
}
