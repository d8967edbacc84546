import type { paths } from './generated/openapi.js';

// Wire types named by operation path and status, not by component name: the document's schema
// names may change when it is regenerated, its paths are the contract.

type JsonOf<R> = R extends { content: { 'application/json': infer T } } ? T : never;
type Ok<Op> = Op extends { responses: infer R } ? JsonOf<R[200 & keyof R]> | JsonOf<R[201 & keyof R]> : never;
type BodyOf<Op> = Op extends { requestBody?: infer B } ? JsonOf<NonNullable<B>> : never;

export type { paths };
export type Job = Ok<paths['/api/v2/jobs/{id}']['get']>;
export type JobStatus = Job['status'];
export type Output = NonNullable<Job['outputs']>[number];
export type SubmitJobRequest = BodyOf<paths['/api/v2/jobs']['post']>;
export type Asset = Ok<paths['/api/v2/assets/{id}']['get']>;
export type AssetFromHashRequest = BodyOf<paths['/api/v2/assets/from-hash']['post']>;

/** The states a job never leaves (the document's JobStatus: "Terminal: succeeded, canceled, failed, expired"). */
export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(['succeeded', 'canceled', 'failed', 'expired']);

/** One frame of a job's event stream, its JSON data parsed. */
export interface JobEvent {
  /** The stream's id for it; send it back as `Last-Event-ID` to resume after it. */
  id: string | undefined;
  /** `status`, `progress`, `preview`, `output`, `queue` … as the server names them. */
  event: string;
  data: unknown;
}
