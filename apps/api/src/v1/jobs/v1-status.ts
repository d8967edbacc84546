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
      return NON_RETRYABLE.has(code) || cloudExceptionType(job.error) === 'ValidationError' ? 'non_retryable_error' : 'error';
    }
    default:
      return 'error';
  }
}

const CLOUD_TYPES = ['ValidationError', 'ModelDownloadError', 'ImageDownloadError', 'OOMError', 'InsufficientFundsError', 'InactiveSubscriptionError'];
const IMAGE_LOADERS = /^Load(Image|ImageMask|ImageOutput)$/;

export interface JobErrorLike {
  code?: string;
  exception_type?: string;
  class_type?: string | null;
  message?: string;
}

/**
 * The `exception_type` a v1 client sees. The contract's cloud types where a failure is one of
 * them; otherwise the engine's own type (what the engine itself would have said).
 *  - ValidationError: the engine refused the prompt (its validation differs from ours, e.g. a
 *    heterogeneous fleet), or a node raised one.
 *  - ImageDownloadError: an input image could not be fetched into the engine (the asset went
 *    away) or the image loader could not read it.
 *  - OOMError: any out-of-memory exception of the engine (torch or Python).
 *  - ModelDownloadError: a loader could not find its model file; the other cloud types pass
 *    through when a (partner) node raises them.
 */
export function cloudExceptionType(error: unknown, engineType?: string, classType?: string | null): string {
  const e = (error ?? {}) as JobErrorLike;
  const type = engineType ?? e.exception_type ?? '';
  const cls = classType ?? e.class_type ?? '';
  const last = type.split('.').pop() ?? type;
  if (CLOUD_TYPES.includes(last)) return last;
  if (/OutOfMemory|(^|\.)MemoryError$|OOM/i.test(type)) return 'OOMError';
  if (e.code === 'prompt_rejected' || e.code === 'invalid_workflow') return 'ValidationError';
  if (e.code === 'missing_asset') return 'ImageDownloadError';
  if (type && IMAGE_LOADERS.test(cls)) return 'ImageDownloadError';
  if (/FileNotFoundError$/.test(type) && /Loader/.test(cls)) return 'ModelDownloadError';
  if (type) return type;
  if (e.code === 'execution_timeout') return 'TimeoutError';
  return 'RuntimeError';
}
