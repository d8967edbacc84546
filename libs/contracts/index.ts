export { ApiError, ERROR_STATUS, errorEnvelope } from './errors.js';
export type { ErrorCode, ErrorEnvelope } from './errors.js';
export type { AssetView, JobView, JobStatusName, OutputView, ProgressView, JobErrorView, JobUrls } from './wire.js';
export { TERMINAL_STATUSES, isTerminal } from './wire.js';
