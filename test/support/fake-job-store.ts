import type { Job, JobStatus } from '#libs/db';
import { canTransition, type JobStore, type JobStoreApi, type JobWithOutputs, type Outcome } from '#libs/jobs';

/**
 * JobStore in memory, for unit tests of the services over it (JobControl, JobViews): the guarded
 * transitions and endings the real store makes in SQL, on rows kept here. What a test needs that
 * this does not keep, it passes as `overrides` (a read that fails, for instance).
 */
export function fakeJobStore(rows: Job[] = [], overrides: Partial<JobStoreApi> = {}): JobStore & { rows: Map<string, Job> } {
  const byId = new Map(rows.map((row) => [row.id, row]));
  const fake: Partial<JobStoreApi> & { rows: Map<string, Job> } = {
    rows: byId,
    get: async (jobId) => byId.get(jobId) ?? null,
    async transition(jobId, from, to, patch = {}) {
      const row = byId.get(jobId);
      if (!row || !from.includes(row.status) || !canTransition(row.status, to)) return null;
      const moved = { ...row, ...(patch as Partial<Job>), status: to };
      byId.set(jobId, moved);
      return moved;
    },
    async finish(jobId, outcome: Outcome) {
      const row = byId.get(jobId);
      if (!row || !(['queued', 'running', 'canceling'] as JobStatus[]).includes(row.status)) return null;
      const ended = { ...row, status: row.status === 'canceling' ? 'canceled' : outcome.status, completedAt: new Date() } as Job;
      byId.set(jobId, ended);
      return ended;
    },
    async findInScope(scope, jobId) {
      const accountId = typeof scope === 'string' ? scope : scope.accountId;
      const row = byId.get(jobId);
      return row && row.accountId === accountId ? ({ outputs: [], ...row } as JobWithOutputs) : null;
    },
    ...overrides,
  };
  return fake as JobStore & { rows: Map<string, Job> };
}
