import { Inject, Injectable } from '@nestjs/common';
import type { Config } from '#libs/config';
import { ApiError, PageQuerySchema, WebhookDeliveryListQuerySchema, isUuid } from '#libs/contracts';
import type { Db, WebhookDelivery, WebhookEndpoint } from '#libs/db';
import type { OutboundPolicy } from '#libs/outbound';
import { ROTATION_OVERLAP_MS, WAKE_CHANNEL, newEndpointSecret, recordTestEvent, sealEndpointSecret } from '#libs/webhooks';
import { CONFIG, DB } from '../core/tokens.js';
import { pageAsked, pageCursor, type PageAfter } from '../v2/paging.js';
import { parseV2Input } from '../v2/parse-input.js';
import type { EndpointInput, EndpointPatch } from './endpoint-body.js';

/** An account has at most this many endpoints. */
export const MAX_ENDPOINTS_PER_ACCOUNT = 20;

const ENDPOINTS_PURPOSE = 'v2-webhook-endpoints';
const DELIVERIES_PURPOSE = 'v2-webhook-deliveries';

export interface PageQuery {
  limit: number;
  after: PageAfter | null;
}

/**
 * An account's webhook endpoints and their deliveries. Every read and write is scoped to the
 * account: another account's endpoint or delivery answers as a missing one.
 */
@Injectable()
export class WebhooksService {
  /** What an endpoint's URL may be: the service's outbound policy, as webhooks are sent under it. */
  readonly urlRules: OutboundPolicy;

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    this.urlRules = { allowLoopback: config.outboundAllowLoopback, requireHttps: config.env === 'production' };
  }

  private notFound(): ApiError {
    return ApiError.notFound('webhook endpoint');
  }

  async find(accountId: string, id: string): Promise<WebhookEndpoint> {
    const endpoint = isUuid(id) ? await this.db.webhookEndpoint.findFirst({ where: { id: id.toLowerCase(), accountId } }) : null;
    if (!endpoint) throw this.notFound();
    return endpoint;
  }

  /** A new endpoint and its secret (shown this once). */
  async create(accountId: string, input: EndpointInput): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    const secret = newEndpointSecret();
    const endpoint = await this.db.$transaction(async (tx) => {
      // Creations of one account one after another, so two at once cannot both pass the count.
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${`webhook-endpoints:${accountId}`}, 0))`;
      if ((await tx.webhookEndpoint.count({ where: { accountId } })) >= MAX_ENDPOINTS_PER_ACCOUNT) {
        throw ApiError.invalid(`An account has at most ${MAX_ENDPOINTS_PER_ACCOUNT} webhook endpoints; delete one first.`);
      }
      return tx.webhookEndpoint.create({
        data: { accountId, url: input.url, events: input.events, description: input.description, secretSealed: sealEndpointSecret(this.config.signingSecret, secret) },
      });
    });
    return { endpoint, secret };
  }

  parsePage(query: unknown, accountId: string): PageQuery {
    return pageAsked(parseV2Input(PageQuerySchema, query), this.config.signingSecret, ENDPOINTS_PURPOSE, accountId);
  }

  /** Up to `limit + 1` endpoints, newest first. */
  list(accountId: string, q: PageQuery): Promise<WebhookEndpoint[]> {
    return this.db.webhookEndpoint.findMany({ where: { accountId, ...after(q.after) }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], take: q.limit + 1 });
  }

  endpointCursor(accountId: string, last: WebhookEndpoint): string {
    return pageCursor(this.config.signingSecret, ENDPOINTS_PURPOSE, accountId, last);
  }

  async update(accountId: string, id: string, patch: EndpointPatch): Promise<WebhookEndpoint> {
    await this.find(accountId, id);
    // Enabling again starts afresh: the reason it was disabled, and its failing streak, are gone.
    const revived = patch.enabled === true ? { disabledReason: null, failingSince: null } : {};
    const updated = await this.db.webhookEndpoint.updateMany({ where: { id: id.toLowerCase(), accountId }, data: { ...patch, ...revived } });
    if (updated.count === 0) throw this.notFound();
    return this.find(accountId, id);
  }

  async remove(accountId: string, id: string): Promise<void> {
    const deleted = isUuid(id) ? await this.db.webhookEndpoint.deleteMany({ where: { id: id.toLowerCase(), accountId } }) : { count: 0 };
    if (deleted.count === 0) throw this.notFound();
  }

  /** A new secret; the old one goes on signing beside it for 24 hours. */
  async rotate(accountId: string, id: string): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    const current = await this.find(accountId, id);
    const secret = newEndpointSecret();
    await this.db.webhookEndpoint.updateMany({
      where: { id: current.id, accountId, secretSealed: current.secretSealed },
      data: { secretSealed: sealEndpointSecret(this.config.signingSecret, secret), previousSecretSealed: current.secretSealed, previousSecretExpiresAt: new Date(Date.now() + ROTATION_OVERLAP_MS) },
    });
    return { endpoint: await this.find(accountId, id), secret };
  }

  /** Queues a `webhook.test` event for the endpoint. */
  async test(accountId: string, id: string): Promise<WebhookDelivery> {
    const endpoint = await this.find(accountId, id);
    if (!endpoint.enabled) throw ApiError.invalid('The endpoint is disabled; enable it first.');
    const deliveryId = await recordTestEvent(this.db, accountId, endpoint.id);
    if (!deliveryId) throw this.notFound();
    return this.db.webhookDelivery.findUniqueOrThrow({ where: { id: deliveryId } });
  }

  parseDeliveryPage(query: unknown, accountId: string): PageQuery & { status: string | null } {
    const q = parseV2Input(WebhookDeliveryListQuerySchema, query);
    return { ...pageAsked(q, this.config.signingSecret, DELIVERIES_PURPOSE, accountId), status: q.status ?? null };
  }

  /** Up to `limit + 1` of an endpoint's deliveries, newest event first. */
  async deliveries(accountId: string, endpointId: string, q: PageQuery & { status: string | null }): Promise<WebhookDelivery[]> {
    const endpoint = await this.find(accountId, endpointId);
    return this.db.webhookDelivery.findMany({
      where: { endpointId: endpoint.id, accountId, ...(q.status ? { status: q.status } : {}), ...after(q.after) },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      take: q.limit + 1,
    });
  }

  deliveryCursor(accountId: string, last: WebhookDelivery): string {
    return pageCursor(this.config.signingSecret, DELIVERIES_PURPOSE, accountId, last);
  }

  /**
   * Sends a delivery again: a new round of attempts on the schedule, with the same `webhook-id`
   * (its receiver sees the same event). One still pending is left as it is.
   */
  async redeliver(accountId: string, deliveryId: string): Promise<WebhookDelivery> {
    const missing = () => ApiError.notFound('webhook delivery');
    const delivery = isUuid(deliveryId) ? await this.db.webhookDelivery.findFirst({ where: { id: deliveryId.toLowerCase(), accountId }, include: { endpoint: { select: { enabled: true } } } }) : null;
    if (!delivery) throw missing();
    if (delivery.status === 'pending') return delivery;
    if (!delivery.endpoint.enabled) throw ApiError.invalid('The endpoint is disabled; enable it first.');
    await this.db.$queryRaw`
      WITH again AS (
        UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = now(), completed_at = NULL,
          response_code = NULL, latency_ms = NULL, error = NULL, lease_until = NULL, lease_token = NULL
        WHERE id = ${delivery.id}::uuid AND account_id = ${accountId}::uuid AND status <> 'pending'
        RETURNING id, pg_notify(${WAKE_CHANNEL}, '')
      )
      SELECT count(*)::int AS n FROM again`;
    const current = await this.db.webhookDelivery.findFirst({ where: { id: delivery.id, accountId } });
    if (!current) throw missing();
    return current;
  }
}

type AfterWhere = { OR?: ({ createdAt: { lt: Date } } | { createdAt: Date; id: { lt: string } })[] };

/** Rows after a page position, in (created_at, id) descending order. */
function after(position: PageAfter | null): AfterWhere {
  if (!position) return {};
  const t = new Date(position.t);
  return { OR: [{ createdAt: { lt: t } }, { createdAt: t, id: { lt: position.id } }] };
}
