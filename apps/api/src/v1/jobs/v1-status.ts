import type { Job } from '#libs/db';

// Failures that retrying the same prompt cannot fix: the workflow or its inputs are wrong.
const NON_RETRYABLE = new Set(['prompt_rejected', 'missing_asset', 'invalid_workflow']);

/** `GET /api/job/{id}/status`, per decisions.md. */
export function v1Status(job: Pick<Job, 'status' | 'error'>): string {
  switch (job.status) {
    case 'queued':
      return 'queued_waiting';
    case 'running':
      return 'executing';
    case 'canceling':
      return 'cancel_requested';
    case 'succeeded':
      return 'success';
    case 'canceled':
      return 'cancelled';
    case 'expired':
      return 'lost';
    case 'failed': {
      const code = (job.error as { code?: string } | null)?.code ?? '';
      return NON_RETRYABLE.has(code) || v1ExceptionType(job.error) === 'ValidationError' ? 'non_retryable_error' : 'error';
    }
    default:
      return 'error';
  }
}

export interface JobErrorLike {
  code?: string;
  exception_type?: string;
  class_type?: string | null;
  node_id?: string | null;
  message?: string;
  traceback?: string | null;
}

/**
 * The `exception_type` a v1 client sees: the engine's own, whenever the engine raised the error
 * (`PIL.UnidentifiedImageError`, `torch.OutOfMemoryError`, ...), on the socket and in history alike.
 * Only failures the engine never saw get a type of ours: a prompt the engine or our validation
 * refused, or an input that could not be staged, is a `ValidationError` (the contract's type for
 * invalid workflows or inputs); a run past its deadline a `TimeoutError`; anything else of the
 * service's (engine lost, outputs not stored) a `RuntimeError`. `ImageDownloadError` is for a
 * failed download of an input from a URL, which no input of this service is.
 */
export function v1ExceptionType(error: unknown): string {
  const e = (error ?? {}) as JobErrorLike;
  if (e.exception_type) return e.exception_type;
  if (e.code === 'prompt_rejected' || e.code === 'invalid_workflow' || e.code === 'missing_asset') return 'ValidationError';
  if (e.code === 'execution_timeout') return 'TimeoutError';
  return 'RuntimeError';
}

export interface EndedJob {
  id: string;
  status: string;
  error: unknown;
  progress: unknown;
  completedAt: Date | null;
  updatedAt: Date;
}

/**
 * The message that ends a prompt the engine did not end itself (an input that could not be
 * staged, a worker lost, a run past its deadline): what the v1 socket is sent when the job ends,
 * and what its history keeps, the same in both, timestamp included. Null when nothing is sent:
 * the job succeeded, or was canceled before it started.
 */
export function cloudEnding(job: EndedJob, started: boolean): [string, Record<string, unknown>] | null {
  const timestamp = (job.completedAt ?? job.updatedAt).getTime();
  if (job.status === 'failed' || job.status === 'expired') {
    const error = (job.error ?? {}) as JobErrorLike;
    return [
      'execution_error',
      {
        prompt_id: job.id,
        timestamp,
        node_id: error.node_id ?? null,
        node_type: error.class_type ?? null,
        executed: [],
        exception_message: error.message ?? (job.status === 'expired' ? 'The job did not finish in time.' : 'The job failed.'),
        exception_type: v1ExceptionType(job.error),
        traceback: error.traceback ? [error.traceback] : [],
        current_inputs: {},
        current_outputs: [],
      },
    ];
  }
  if (job.status === 'canceled' && started) {
    // The node the last progress snapshot saw running is the one the interrupt stopped.
    const at = (job.progress ?? {}) as { current_node?: string | null; current_node_class?: string | null };
    return ['execution_interrupted', { prompt_id: job.id, timestamp, node_id: at.current_node ?? null, node_type: at.current_node_class ?? null, executed: [] }];
  }
  return null;
}
