import { randomUUID } from 'node:crypto';
import type { Db } from '#libs/db';

// The deliverers' statements on webhook_deliveries. Any number of webhooks processes share the
// table: a claim takes due rows with FOR UPDATE SKIP LOCKED (two claims never take the same row)
// and leases them; a lease that lapses (its process died mid-attempt) makes the row due again, so
// an event is delivered at least once, and twice only when a process died after sending it and
// before recording that it had.

/** A delivery a deliverer holds, with what it needs of its endpoint. */
export interface ClaimedDelivery {
  id: string;
  endpointId: string;
  eventType: string;
  jobId: string | null;
  assetId: string | null;
  /** Attempts made before this one. */
  attempts: number;
  createdAt: Date;
  leaseToken: string;
  url: string;
  enabled: boolean;
  secretSealed: string;
  previousSecretSealed: string | null;
  previousSecretExpiresAt: Date | null;
}

/** What one attempt comes to, as recorded. */
export interface AttemptRecord {
  status: 'pending' | 'succeeded' | 'failed';
  /** Whether a request was made (an attempt of a disabled endpoint's delivery is not one). */
  attempted: boolean;
  nextAttemptAt: Date | null;
  at: Date;
  responseCode: number | null;
  latencyMs: number | null;
  error: string | null;
  /** The receiver answered 410: its endpoint is disabled with this reason. */
  gone: string | null;
}

interface ClaimRow {
  id: string;
  endpoint_id: string;
  event_type: string;
  job_id: string | null;
  asset_id: string | null;
  attempts: number;
  created_at: Date;
  lease_token: string;
  url: string;
  enabled: boolean;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: Date | null;
}

export class DeliveryStore {
  constructor(
    private readonly db: Db,
    /** An endpoint whose every attempt failed this long is disabled. */
    private readonly disableAfterSeconds: number,
  ) {}

  /** Up to `limit` due deliveries, soonest first, leased to this caller for `leaseMs`. */
  async claim(limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    const token = randomUUID();
    const rows = await this.db.$queryRaw<ClaimRow[]>`
      WITH due AS (
        SELECT id FROM webhook_deliveries
        WHERE status = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
        ORDER BY next_attempt_at
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE webhook_deliveries d SET lease_until = now() + make_interval(secs => ${leaseMs / 1000}), lease_token = ${token}::uuid
      FROM due, webhook_endpoints e
      WHERE d.id = due.id AND e.id = d.endpoint_id
      RETURNING d.id, d.endpoint_id, d.event_type, d.job_id, d.asset_id, d.attempts, d.created_at, d.lease_token::text AS lease_token,
                e.url, e.enabled, e.secret_sealed, e.previous_secret_sealed, e.previous_secret_expires_at`;
    return rows.map((r) => ({
      id: r.id,
      endpointId: r.endpoint_id,
      eventType: r.event_type,
      jobId: r.job_id,
      assetId: r.asset_id,
      attempts: r.attempts,
      createdAt: r.created_at,
      leaseToken: r.lease_token,
      url: r.url,
      enabled: r.enabled,
      secretSealed: r.secret_sealed,
      previousSecretSealed: r.previous_secret_sealed,
      previousSecretExpiresAt: r.previous_secret_expires_at,
    }));
  }

  /**
   * Records an attempt while the lease holds (a lapsed lease records nothing: another process has
   * the delivery now), and keeps its endpoint's health in the same statement: a success clears
   * `failing_since`; a failure sets it, and disables the endpoint once it has failed for
   * `disableAfterSeconds`, or at once on a 410. An attempt that disables its endpoint ends its
   * delivery too. Returns whether the record was made, the status recorded, and the reason when
   * this attempt disabled the endpoint.
   */
  async record(delivery: ClaimedDelivery, a: AttemptRecord): Promise<{ recorded: boolean; status: string; disabled: string | null }> {
    const ok = a.status === 'succeeded';
    const rows = await this.db.$queryRaw<{ recorded: number; status: string | null; disabled: string | null }[]>`
      WITH stop AS (
        SELECT CASE
          WHEN ${a.gone}::text IS NOT NULL THEN ${a.gone}::text
          WHEN NOT ${ok} AND w.failing_since <= ${a.at}::timestamptz - make_interval(secs => ${this.disableAfterSeconds})
            THEN 'Every delivery attempt failed from ' || to_char(w.failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') ||
                 ' on; the last: ' || coalesce(${a.error}::text, 'no answer') || '.'
        END AS reason
        FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
        WHERE d.id = ${delivery.id}::uuid AND d.lease_token = ${delivery.leaseToken}::uuid AND w.enabled AND ${a.attempted}
      ), outcome AS (
        SELECT CASE WHEN ${a.status} = 'pending' AND (SELECT reason FROM stop) IS NOT NULL THEN 'failed' ELSE ${a.status} END AS status
      ), d AS (
        UPDATE webhook_deliveries SET
          attempts = attempts + ${a.attempted ? 1 : 0},
          status = outcome.status,
          next_attempt_at = CASE WHEN outcome.status = 'pending' THEN ${a.nextAttemptAt}::timestamptz END,
          last_attempt_at = CASE WHEN ${a.attempted} THEN ${a.at}::timestamptz ELSE last_attempt_at END,
          response_code = ${a.responseCode}::int,
          latency_ms = ${a.latencyMs}::int,
          error = ${a.error}::text,
          completed_at = CASE WHEN outcome.status = 'pending' THEN NULL ELSE ${a.at}::timestamptz END,
          lease_until = NULL,
          lease_token = NULL
        FROM outcome
        WHERE id = ${delivery.id}::uuid AND lease_token = ${delivery.leaseToken}::uuid
        RETURNING endpoint_id, outcome.status
      ), e AS (
        UPDATE webhook_endpoints w SET
          failing_since = CASE WHEN ${ok} THEN NULL ELSE coalesce(w.failing_since, ${a.at}::timestamptz) END,
          enabled = w.enabled AND (SELECT reason FROM stop) IS NULL,
          disabled_reason = coalesce((SELECT reason FROM stop), w.disabled_reason),
          updated_at = CASE WHEN (SELECT reason FROM stop) IS NULL THEN w.updated_at ELSE ${a.at}::timestamptz END
        FROM d
        WHERE w.id = d.endpoint_id AND w.enabled AND ${a.attempted}
        RETURNING w.id
      )
      SELECT (SELECT count(*) FROM d)::int AS recorded, (SELECT status FROM d) AS status,
             CASE WHEN (SELECT count(*) FROM e) > 0 THEN (SELECT reason FROM stop) END AS disabled`;
    const row = rows[0];
    return { recorded: (row?.recorded ?? 0) > 0, status: row?.status ?? a.status, disabled: row?.disabled ?? null };
  }

  /**
   * Deletes ended test deliveries older than the jobs' retention, a batch at a time: a job's
   * deliveries go with the job (their foreign key), but `webhook.test` ones belong to no job.
   */
  async purgeTestDeliveries(retentionSeconds: number): Promise<number> {
    return this.db.$executeRaw`
      DELETE FROM webhook_deliveries WHERE id IN (
        SELECT id FROM webhook_deliveries
        WHERE job_id IS NULL AND status <> 'pending' AND created_at < now() - make_interval(secs => ${retentionSeconds})
        LIMIT 1000)`;
  }

  /** The age of the oldest event not delivered yet, in seconds (0: none pending). */
  async oldestPendingSeconds(): Promise<number> {
    const rows = await this.db.$queryRaw<{ age: number | null }[]>`
      SELECT extract(epoch FROM now() - min(created_at))::float8 AS age FROM webhook_deliveries WHERE status = 'pending'`;
    return rows[0]?.age ?? 0;
  }
}
