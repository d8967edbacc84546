// Shapes that leave the API, as the contract names them.

export type JobStatusName = 'queued' | 'running' | 'succeeded' | 'canceling' | 'canceled' | 'failed' | 'expired';

export const TERMINAL_STATUSES: readonly JobStatusName[] = ['succeeded', 'canceled', 'failed', 'expired'];

export function isTerminal(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export interface ProgressView {
  value: number;
  nodes_done: number;
  nodes_total: number;
  current_node: string | null;
  current_node_class: string | null;
  step: number | null;
  steps: number | null;
  message: string | null;
}

export interface OutputView {
  node_id: string;
  name: string;
  type: 'image' | 'video' | 'audio' | 'text' | 'file' | 'latent';
  content_type: string;
  size_bytes: number;
  id: string;
  hash: string | null;
  url: string;
  url_expires_at: string;
  job_id: string | null;
}

export interface JobErrorView {
  code: string;
  message: string;
  node_id?: string | null;
  class_type?: string | null;
  traceback?: string | null;
}

export interface JobUrls {
  self: string;
  events: string;
  cancel: string;
  logs?: string;
}

export interface JobView {
  id: string;
  status: JobStatusName;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  expires_at: string;
  queue_position: number | null;
  progress: ProgressView | null;
  outputs: OutputView[];
  error: JobErrorView | null;
  metrics: { queue_ms: number | null; execution_ms: number | null };
  urls: JobUrls;
  /** Cancel-After: when the job ends `expired` unless it finished before (additive); null without one. */
  deadline_at: string | null;
}

export interface AssetView {
  id: string;
  hash: string;
  size_bytes: number;
  content_type: string;
  file_path: string;
  tags: string[];
  created_new: boolean;
  created_at: string;
  url: string;
  url_expires_at: string;
  expires_at: string | null;
  job_id: string | null;
}
