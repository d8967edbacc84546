import { Blake3Hasher } from '@napi-rs/blake-hash';
import { Redis } from 'ioredis';
import { isTerminal } from '#libs/contracts';
import { JobEventLog, jobKeys } from '#libs/jobs';
import { bearer, call, jsonInit } from './http.js';
import type { TestStack } from './stack.js';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export interface InvariantReport {
  jobs: number;
  byStatus: Record<string, number>;
  outputsChecked: number;
  violations: string[];
}

/**
 * A client that submits jobs the way a careful tenant does (an Idempotency-Key per job, retried
 * with the same key on network errors and 5xx until accepted) and then checks the promises that
 * must hold after any fault: every job ends in exactly one terminal state, every succeeded job's
 * outputs download intact, no job is charged twice, no key maps to two jobs.
 */
export class JobBook {
  /** Idempotency key -> every job id the API answered for it (must be one). */
  readonly answers = new Map<string, Set<string>>();
  /** Submissions answered by an error before a retry got through. */
  retried = 0;
  /** Error statuses seen while retrying, by status ("network" for a failed connection). */
  readonly errorsSeen = new Map<string, number>();

  constructor(
    private readonly stack: TestStack,
    private readonly key: string,
  ) {}

  /** Submits with retries against any of `apiUrls` (round-robin), giving up after `deadlineMs`. */
  async submit(apiUrls: string[], workflow: object, idempotencyKey: string, deadlineMs = 60_000): Promise<string> {
    const until = Date.now() + deadlineMs;
    for (let attempt = 0; ; attempt++) {
      const url = apiUrls[attempt % apiUrls.length]!;
      let outcome: string;
      try {
        const reply = await call(`${url}/api/v2/jobs`, {
          ...jsonInit('POST', { workflow }, bearer(this.key, { 'idempotency-key': idempotencyKey })),
          signal: AbortSignal.timeout(10_000),
        });
        // A retry whose first attempt created the job (its answer lost) is refused, naming the job.
        const id = reply.status === 201 ? (reply.body.id as string) : reply.status === 422 && reply.body?.error?.code === 'idempotency_key_reuse' ? (reply.body.error.details?.job_id as string | undefined) : undefined;
        if (id) {
          const ids = this.answers.get(idempotencyKey) ?? new Set<string>();
          ids.add(id);
          this.answers.set(idempotencyKey, ids);
          return id;
        }
        if (reply.status < 500 && reply.status !== 429) throw new Error(`submission refused: ${reply.status} ${reply.text.slice(0, 200)}`);
        outcome = String(reply.status);
      } catch (err) {
        if ((err as Error).message.startsWith('submission refused')) throw err;
        outcome = 'network';
      }
      this.errorsSeen.set(outcome, (this.errorsSeen.get(outcome) ?? 0) + 1);
      if (attempt === 0) this.retried++;
      if (Date.now() > until) throw new Error(`submission ${idempotencyKey} not accepted in time (last: ${outcome})`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  get jobIds(): string[] {
    return [...new Set([...this.answers.values()].flatMap((s) => [...s]))];
  }

  /** Waits until every job this book submitted is in a terminal state (read from the database). */
  async waitAllTerminal(timeoutMs: number): Promise<void> {
    const ids = this.jobIds;
    const until = Date.now() + timeoutMs;
    for (;;) {
      const rows = await this.stack.db.job.findMany({ where: { id: { in: ids } }, select: { id: true, status: true } });
      const open = rows.filter((r) => !isTerminal(r.status));
      if (open.length === 0 && rows.length === ids.length) return;
      if (Date.now() > until) throw new Error(`${open.length} of ${ids.length} jobs still open: ${open.slice(0, 5).map((r) => `${r.id}=${r.status}`).join(', ')}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async verify(apiUrl: string, redisUrl: string): Promise<InvariantReport> {
    const violations: string[] = [];
    for (const [key, ids] of this.answers) if (ids.size !== 1) violations.push(`idempotency key ${key} answered with ${ids.size} jobs`);

    const account = await this.accountId();
    const jobs = await this.stack.db.job.findMany({ where: { accountId: account } });
    const byStatus: Record<string, number> = {};
    for (const job of jobs) byStatus[job.status] = (byStatus[job.status] ?? 0) + 1;
    if (jobs.length !== this.answers.size) violations.push(`${jobs.length} jobs exist for ${this.answers.size} idempotency keys`);
    const records = await this.stack.db.idempotencyRecord.findMany({ where: { accountId: account } });
    const jobsPerKey = new Map(records.map((r) => [r.key, r.jobId]));
    for (const [key, ids] of this.answers) if (jobsPerKey.get(key) !== [...ids][0]) violations.push(`idempotency record of ${key} points elsewhere`);

    const charges = await this.stack.db.creditLedgerEntry.groupBy({ by: ['ref'], where: { accountId: account, reason: 'job' }, _count: { _all: true }, _sum: { amount: true } });
    const charged = new Map(charges.map((c) => [c.ref, c]));
    for (const c of charges) if (c._count._all > 1) violations.push(`job ${c.ref} charged ${c._count._all} times`);

    const redis = new Redis(redisUrl);
    const events = new JobEventLog(redis, jobKeys(this.stack.redisPrefix), 3_600_000);
    let outputsChecked = 0;
    try {
      for (const job of jobs) {
        if (!isTerminal(job.status)) violations.push(`job ${job.id} ended ${job.status}`);
        const terminalEvents = (await events.since(job.id)).filter((e) => e.event === 'status' && isTerminal((JSON.parse(e.data) as { status: string }).status));
        if (terminalEvents.length > 1) violations.push(`job ${job.id} reported ${terminalEvents.length} terminal states`);
        const charge = charged.get(job.id);
        if (charge && -(charge._sum.amount ?? 0n) !== (job.chargedCredits ?? 0n)) violations.push(`job ${job.id} ledger ${charge._sum.amount} != charged ${job.chargedCredits}`);
        if (job.status !== 'succeeded') continue;
        const view = await call(`${apiUrl}/api/v2/jobs/${job.id}`, { headers: bearer(this.key) });
        const outputs = (view.body.outputs ?? []) as { url: string; hash: string; size_bytes: number; content_type: string }[];
        if (outputs.length === 0) violations.push(`succeeded job ${job.id} has no outputs`);
        for (const output of outputs) {
          const res = await fetch(output.url);
          const bytes = Buffer.from(await res.arrayBuffer());
          const hash = new Blake3Hasher().update(bytes).digest('hex');
          outputsChecked++;
          if (res.status !== 200) violations.push(`output of ${job.id} answered ${res.status}`);
          else if (`blake3:${hash}` !== output.hash || bytes.length !== output.size_bytes) violations.push(`output of ${job.id} is ${bytes.length} B ${hash}, listed ${output.size_bytes} B ${output.hash}`);
          else if (output.content_type === 'image/png' && !bytes.subarray(0, 8).equals(PNG_SIGNATURE)) violations.push(`output of ${job.id} is not a PNG`);
        }
      }
    } finally {
      redis.disconnect();
    }
    return { jobs: jobs.length, byStatus, outputsChecked, violations };
  }

  private async accountId(): Promise<string> {
    const first = this.jobIds[0];
    if (!first) throw new Error('no jobs submitted');
    return (await this.stack.db.job.findUniqueOrThrow({ where: { id: first }, select: { accountId: true } })).accountId;
  }
}

/** "succeeded 12, failed 1" */
export function describeStatuses(byStatus: Record<string, number>): string {
  return Object.entries(byStatus)
    .map(([s, n]) => `${s} ${n}`)
    .join(', ');
}
