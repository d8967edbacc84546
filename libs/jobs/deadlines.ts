// Why a job ended `expired`. Its own deadline (Cancel-After) is set at submission and bounds both
// the wait in the queue and the run (submission and claim take the earlier of the two); when it is
// the deadline that passed, the job says so, not the service-wide timeout it stood in for.

export interface ExpiryError {
  code: 'queue_timeout' | 'execution_timeout' | 'deadline_exceeded';
  message: string;
}

export function expiryError(stage: 'queue' | 'run', ownDeadline: boolean): ExpiryError {
  if (ownDeadline) return { code: 'deadline_exceeded', message: 'The job did not finish before the deadline its Cancel-After set.' };
  return stage === 'queue'
    ? { code: 'queue_timeout', message: 'The job waited in the queue longer than allowed.' }
    : { code: 'execution_timeout', message: 'The job ran longer than allowed.' };
}

/** Whether a run deadline is the job's own (Cancel-After) rather than the execution timeout. */
export function isOwnDeadline(job: { deadlineAt: Date | null; runDeadlineAt: Date | null }): boolean {
  return job.deadlineAt !== null && job.runDeadlineAt !== null && job.deadlineAt.getTime() <= job.runDeadlineAt.getTime();
}
