export { ApiError, ERROR_STATUS, errorEnvelope } from './errors.js';
export type { ErrorCode, ErrorEnvelope } from './errors.js';
export type { AssetView, JobView, JobStatusName, OutputView, ProgressView, JobErrorView, JobUrls } from './wire.js';
export { TERMINAL_STATUSES, isTerminal } from './wire.js';
export { isStorableText } from './text.js';
export { copyJson, isRawJson, losslessReviver, mayHoldLongIntegers, parseLosslessJson, rawInteger } from './lossless-json.js';
export type { RawJson } from './lossless-json.js';
export { ROUTER_BUCKETS, ROUTER_BUCKET_STATUS } from './router.js';
export type { RouterBucket } from './router.js';
