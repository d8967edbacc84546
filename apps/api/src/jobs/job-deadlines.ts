/**
 * A new job's deadlines: the queue timeout, and its own deadline when the client set one
 * (Cancel-After, `ownSeconds` from now), which also ends the wait in the queue when it comes
 * first. The run deadline is set when a worker claims the job (the earlier of the execution
 * timeout and this one).
 */
export function jobDeadlines(now: number, queueTimeoutSeconds: number, ownSeconds: number | null): { queueDeadlineAt: Date; deadlineAt: Date | null } {
  const queueDeadline = now + queueTimeoutSeconds * 1000;
  if (ownSeconds === null) return { queueDeadlineAt: new Date(queueDeadline), deadlineAt: null };
  const own = now + ownSeconds * 1000;
  return { queueDeadlineAt: new Date(Math.min(queueDeadline, own)), deadlineAt: new Date(own) };
}
