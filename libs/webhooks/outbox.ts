import { Prisma, type Db } from '#libs/db';
import { TEST_EVENT } from './events.js';

// The outbox: a webhook event is one `webhook_deliveries` row per subscribed endpoint, inserted by
// the very statement that makes the state change it reports (one more CTE in it). The event then
// commits exactly when the change does; a crash between the two cannot lose or invent it.
//
// Each inserted row also sends a NOTIFY on WAKE_CHANNEL. PostgreSQL delivers it when the statement
// commits (never before, so a woken deliverer finds the row), folds repeats within a transaction
// into one, and sends nothing when no row was written. The webhooks process LISTENs and attempts
// a delivery within milliseconds of the change; a periodic poll is its fallback.

export const WAKE_CHANNEL = 'webhook_deliveries';

export interface WebhookEventSource {
  /** A CTE (or table) holding the rows the change wrote, e.g. `done`. */
  from: Prisma.Sql;
  /** Expressions over `from`: the account, the job, and the event type (text). */
  accountId: Prisma.Sql;
  jobId: Prisma.Sql;
  type: Prisma.Sql;
  /** For `job.output`: the output's asset. */
  assetId?: Prisma.Sql;
}

/**
 * `webhook_events AS (...)`, to be listed in the WITH of the statement that makes the change:
 * for each row of `from`, one delivery per enabled endpoint of its account subscribed to its type.
 * It runs whether or not the statement reads it (a data-modifying CTE always runs to completion).
 */
export function webhookEventsCte(source: WebhookEventSource): Prisma.Sql {
  return Prisma.sql`webhook_events AS (
    INSERT INTO webhook_deliveries (endpoint_id, account_id, event_type, job_id, asset_id, next_attempt_at)
    SELECT e.id, e.account_id, ev.type, ev.job_id, ev.asset_id, now()
    FROM (SELECT ${source.accountId} AS account_id, ${source.jobId} AS job_id, ${source.type} AS type,
                 ${source.assetId ?? Prisma.sql`NULL::uuid`} AS asset_id FROM ${source.from}) ev
    JOIN webhook_endpoints e ON e.account_id = ev.account_id AND e.enabled AND ev.type = ANY (e.events)
    RETURNING pg_notify(${WAKE_CHANNEL}, '')
  )`;
}

/** A `webhook.test` delivery to one endpoint of the account; its id, or null when the endpoint is not the account's. */
export async function recordTestEvent(db: Db, accountId: string, endpointId: string): Promise<string | null> {
  const rows = await db.$queryRaw<{ id: string }[]>`
    WITH test AS (
      INSERT INTO webhook_deliveries (endpoint_id, account_id, event_type, next_attempt_at)
      SELECT id, account_id, ${TEST_EVENT}, now() FROM webhook_endpoints WHERE id = ${endpointId}::uuid AND account_id = ${accountId}::uuid
      RETURNING id, pg_notify(${WAKE_CHANNEL}, '')
    )
    SELECT id FROM test`;
  return rows[0]?.id ?? null;
}

/** The events of `jobs` rows a statement just moved (`from` returns their columns): `job.<status>`. */
export function jobStatusEventsCte(from: Prisma.Sql): Prisma.Sql {
  return webhookEventsCte({ from, accountId: Prisma.sql`account_id`, jobId: Prisma.sql`id`, type: Prisma.sql`'job.' || status::text` });
}

/** The `job.output` events of the outputs a statement just recorded (`from` returns their asset `id`). */
export function outputEventsCte(from: Prisma.Sql, accountId: string, jobId: string): Prisma.Sql {
  return webhookEventsCte({ from, accountId: Prisma.sql`${accountId}::uuid`, jobId: Prisma.sql`${jobId}::uuid`, type: Prisma.sql`'job.output'`, assetId: Prisma.sql`id` });
}
