import type { PromptErrorBody } from './http-types.js';

/** The engine answered with an unexpected HTTP status. */
export class EngineHttpError extends Error {
  override name = 'EngineHttpError';
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly body: string,
  ) {
    super(`${method} ${path} answered ${status}${body ? `: ${body.slice(0, 300)}` : ''}`);
  }
}

/** The engine refused a prompt (HTTP 400); `body` is the engine's own error body. */
export class EngineValidationError extends Error {
  override name = 'EngineValidationError';
  constructor(readonly body: PromptErrorBody) {
    super(`prompt refused: ${body.error?.type ?? 'unknown'}: ${body.error?.message ?? ''}`);
  }
  get errorType(): string {
    return this.body.error?.type ?? 'unknown';
  }
}

/** The engine could not be reached (refused, reset, timed out). */
export class EngineUnavailableError extends Error {
  override name = 'EngineUnavailableError';
  constructor(message: string, override readonly cause?: unknown) {
    super(message);
  }
}

export function isPromptErrorBody(value: unknown): value is PromptErrorBody {
  if (typeof value !== 'object' || value === null) return false;
  const err = (value as { error?: unknown }).error;
  return typeof err === 'object' && err !== null && typeof (err as { type?: unknown }).type === 'string';
}
