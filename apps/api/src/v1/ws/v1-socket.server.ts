import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { Inject, Injectable, type BeforeApplicationShutdown, type OnApplicationShutdown, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Config } from '#libs/config';
import { ApiError, errorEnvelope } from '#libs/contracts';
import { JobStore } from '#libs/jobs';
import { UpgradeAuth } from '../../auth/index.js';
import { CONFIG } from '../../core/tokens.js';
import { upgradeOriginAllowed } from '../../http/cors.js';
import { EventFanout } from '../../jobs/event-fanout.js';
import type { JobScope } from '../../jobs/job-views.service.js';
import { AccountLimits } from '../../limits/index.js';
import { DeploymentsService } from '../../surface/deployments.service.js';
import { requestUrlRewriter } from '../../surface/request-scope.js';
import { TenantLogs } from '../internal/tenant-logs.service.js';
import { AccountFeed, type FeedDeps } from './account-feed.js';
import { ClientSocket } from './client-socket.js';

const MAX_INCOMING_FRAME = 64 * 1024;
const PING_MS = 30_000;
const CLIENT_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

function reject(socket: Duplex, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(errorEnvelope(code, message));
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
  setTimeout(() => socket.destroy(), 1_000).unref();
}

/**
 * The engine's WebSocket at `/ws` and `/api/ws` (under BASE_PATH), on the API's own HTTP server.
 * The key is checked before the upgrade (401 without), and on the deployment surface the
 * deployment, as the HTTP routes check it. The sockets of one account on this replica (of one
 * deployment, on its surface) share one feed; messages reach them from any worker through Redis,
 * so any replica will do.
 */
@Injectable()
export class V1SocketServer implements OnModuleInit, OnModuleDestroy, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_INCOMING_FRAME, perMessageDeflate: false, clientTracking: false });
  private readonly feeds = new Map<string, AccountFeed>();
  private readonly clients = new Set<ClientSocket>();
  private server: Server | null = null;
  private pinger: NodeJS.Timeout | null = null;
  private readonly paths: Set<string>;
  /** The deployment surface's prefix and host routing, as the HTTP routes get them. */
  private readonly rewrite: (req: IncomingMessage) => string;
  private readonly deps: FeedDeps;

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(CONFIG) private readonly config: Config,
    private readonly jobs: JobStore,
    private readonly auth: UpgradeAuth,
    private readonly limits: AccountLimits,
    private readonly deployments: DeploymentsService,
    fanout: EventFanout,
    logs: TenantLogs,
  ) {
    const base = config.api.basePath;
    this.paths = new Set([`${base}/ws`, `${base}/api/ws`]);
    this.rewrite = requestUrlRewriter(config);
    this.deps = {
      fanout,
      queueRemaining: (scope, excluding) => jobs.countInFlight(scope, excluding),
      job: (jobId) => jobs.socketView(jobId),
      logSubscribers: (accountId) => logs.subscribers(accountId),
      jobLog: (jobId) => logs.ofJob(jobId),
    };
  }

  onModuleInit(): void {
    this.server = this.adapterHost.httpAdapter.getHttpServer() as Server;
    this.server.on('upgrade', this.onUpgrade);
    this.pinger = setInterval(() => this.pingAll(), PING_MS);
    this.pinger.unref();
  }

  onModuleDestroy(): void {
    this.server?.off('upgrade', this.onUpgrade);
    if (this.pinger) clearInterval(this.pinger);
  }

  /** The replica is stopping: 1012 (service restart) tells clients to reconnect, to another replica. */
  beforeApplicationShutdown(): void {
    for (const c of this.clients) c.close(1012, 'server restarting');
  }

  onApplicationShutdown(): void {
    for (const c of this.clients) c.ws.terminate();
    for (const feed of this.feeds.values()) feed.close();
    this.feeds.clear();
    this.wss.close();
  }

  private readonly onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer): void => {
    // Upgrades reach the HTTP server directly, past Fastify's URL rewriting: rewrite here too.
    const url = new URL(this.rewrite(request), 'http://localhost');
    if (!this.paths.has(url.pathname)) {
      // Another upgrade listener may own this path; with none, answer instead of hanging.
      if (this.server?.listenerCount('upgrade') === 1) reject(socket, 404, 'not_found', 'Not found.');
      return;
    }
    socket.on('error', () => undefined);
    // Before the key is looked at: a page from elsewhere learns nothing, and costs no lookup.
    if (!upgradeOriginAllowed(this.config, request)) {
      reject(socket, 403, 'forbidden', 'Pages from this origin may not open the socket.');
      return;
    }
    void this.accept(request, socket, head, url).catch((err: unknown) => {
      if (err instanceof ApiError) reject(socket, err.status, err.code, err.message, err.headers);
      else reject(socket, 503, 'service_unavailable', 'A dependency is temporarily unavailable; retry shortly.', { 'Retry-After': '1' });
    });
  };

  private async accept(request: IncomingMessage, socket: Duplex, head: Buffer, url: URL): Promise<void> {
    const account = await this.auth.authenticate(request);
    // Resolved once, at the upgrade: every message of the socket is within it.
    const scope = await this.deployments.jobScope({ raw: request }, account);
    const given = url.searchParams.get('clientId');
    const sid = given && CLIENT_ID.test(given) ? given : randomUUID().replace(/-/g, '');
    const stream = await this.limits.openStream(account, `ws:${randomUUID()}`);
    if (socket.destroyed) {
      await stream.close();
      return;
    }
    this.wss.handleUpgrade(request, socket, head, (ws) => this.attach(ws, scope, sid, sid === given, stream));
  }

  private attach(ws: WebSocket, scope: JobScope, sid: string, named: boolean, stream: { refresh(): Promise<void>; close(): Promise<void> }): void {
    const client = new ClientSocket(ws, sid);
    this.clients.add(client);
    const key = `${scope.accountId}/${scope.deploymentId ?? ''}`;
    let feed = this.feeds.get(key);
    if (!feed) {
      feed = new AccountFeed(scope, this.deps);
      this.feeds.set(key, feed);
    }
    const joined = feed;
    joined.joining++;
    // The greeting goes through the feed so that it comes before anything else the socket gets.
    joined.enqueue(async () => {
      try {
        const remaining = await this.deps.queueRemaining(scope);
        client.sendJson('status', { status: { exec_info: { queue_remaining: remaining } }, sid });
        // As the engine does: a client back while its prompt runs is told the node running now.
        // (A client that named no id has no prompt of its own to come back to.)
        const node = named ? await this.runningNode(scope, sid) : null;
        if (node) client.sendJson('executing', { node });
        if (ws.readyState === ws.OPEN) joined.sockets.add(client);
      } finally {
        joined.joining--;
      }
    }, true);
    const refresh = setInterval(() => void stream.refresh().catch(() => undefined), 20_000);
    ws.on('pong', () => (client.alive = true));
    ws.on('message', (data, isBinary) => {
      if (!client.countIncoming() || isBinary) return;
      this.onClientMessage(client, joined, data.toString());
    });
    ws.on('error', () => undefined);
    ws.on('close', () => {
      clearInterval(refresh);
      void stream.close().catch(() => undefined);
      this.clients.delete(client);
      joined.sockets.delete(client);
      joined.enqueue(() => {
        // No socket left and none about to join: stop listening for this account.
        if (joined.sockets.size > 0 || joined.joining > 0 || this.feeds.get(key) !== joined) return;
        this.feeds.delete(key);
        joined.close();
      }, true);
    });
  }

  /** The node that the scope's running prompt of this client id runs now, or null. */
  private async runningNode(scope: JobScope, clientId: string): Promise<string | null> {
    const progress = await this.jobs.runningProgress(scope, clientId);
    const node = (progress as { current_node?: unknown } | null | undefined)?.current_node;
    return typeof node === 'string' ? node : null;
  }

  /** A client may declare its capabilities; the server answers with its own, as the engine does. */
  private onClientMessage(client: ClientSocket, feed: AccountFeed, text: string): void {
    let message: { type?: unknown; data?: unknown };
    try {
      message = JSON.parse(text) as typeof message;
    } catch {
      return;
    }
    if (message?.type !== 'feature_flags') return;
    const data = (typeof message.data === 'object' && message.data !== null ? message.data : {}) as Record<string, unknown>;
    client.supportsPreviewMetadata = data.supports_preview_metadata === true;
    // Through the feed, behind the greeting: the engine's first message is always `status` with the sid.
    feed.enqueue(() => client.sendJson('feature_flags', { supports_preview_metadata: true, max_upload_size: this.config.maxUploadBytes }), true);
  }

  private pingAll(): void {
    for (const c of this.clients) {
      if (!c.alive) {
        c.ws.terminate();
        continue;
      }
      c.alive = false;
      c.ws.ping();
    }
  }
}
