/** Shapes of the engine's HTTP API (ComfyUI 0.3.64). */
import type { FeatureFlags, NodeId, NodeUiOutput, QueueInfo } from './messages.js';

/** A link to another node's output: `[node_id, output_index]`. */
export type NodeLink = [NodeId, number];

export interface PromptNode {
  class_type: string;
  inputs: Record<string, unknown>;
  _meta?: { title?: string; [key: string]: unknown };
}

/** A workflow in the engine's API format. */
export type ApiPrompt = Record<NodeId, PromptNode>;

export interface SubmitPromptRequest {
  prompt: ApiPrompt;
  client_id?: string;
  prompt_id?: string;
  extra_data?: Record<string, unknown>;
  number?: number;
  front?: boolean;
  partial_execution_targets?: NodeId[];
}

export interface EngineErrorDetail {
  type: string;
  message: string;
  details: string;
  extra_info: Record<string, unknown>;
}

export interface NodeValidationError {
  errors: EngineErrorDetail[];
  dependent_outputs: NodeId[];
  class_type: string;
}

export interface SubmitPromptResponse {
  prompt_id: string;
  number: number;
  node_errors: Record<NodeId, NodeValidationError>;
}

/** The engine's 400 body for a prompt it refuses. */
export interface PromptErrorBody {
  error: EngineErrorDetail;
  node_errors: Record<NodeId, NodeValidationError>;
}

/** `[number, prompt_id, prompt, extra_data, outputs_to_execute]` */
export type QueueItem = [number, string, ApiPrompt, Record<string, unknown>, NodeId[]];

export interface QueueResponse {
  queue_running: QueueItem[];
  queue_pending: QueueItem[];
}

export type StatusMessageTuple = [string, Record<string, unknown>];

export interface HistoryStatus {
  status_str: 'success' | 'error';
  completed: boolean;
  messages: StatusMessageTuple[];
}

export interface HistoryNodeMeta {
  node_id: NodeId;
  display_node: NodeId;
  parent_node: NodeId | null;
  real_node_id: NodeId;
}

export interface HistoryEntry {
  prompt: QueueItem;
  outputs: Record<NodeId, NodeUiOutput>;
  status: HistoryStatus | null;
  meta: Record<NodeId, HistoryNodeMeta>;
}

export type HistoryResponse = Record<string, HistoryEntry>;

export interface SystemStats {
  system: {
    os: string;
    ram_total: number;
    ram_free: number;
    comfyui_version: string;
    required_frontend_version?: string;
    installed_templates_version?: string | null;
    required_templates_version?: string;
    python_version: string;
    pytorch_version: string;
    embedded_python: boolean;
    argv: string[];
    [key: string]: unknown;
  };
  devices: Array<{
    name: string;
    type: string;
    index: number | null;
    vram_total: number;
    vram_free: number;
    torch_vram_total: number;
    torch_vram_free: number;
  }>;
}

export type FeaturesResponse = FeatureFlags;

export type PromptQueueInfo = QueueInfo;

export interface UploadImageResponse {
  name: string;
  subfolder: string;
  type: string;
}

/** One node class in `GET /object_info`. Input specs are `[type, options?]`. */
export interface NodeDefinition {
  input: {
    required?: Record<string, unknown[]>;
    optional?: Record<string, unknown[]>;
    hidden?: Record<string, unknown>;
  };
  input_order: { required?: string[]; optional?: string[]; hidden?: string[] };
  output: string[];
  output_is_list: boolean[];
  output_name: string[];
  name: string;
  display_name: string | null;
  description?: string;
  python_module: string;
  category: string;
  output_node: boolean;
  output_tooltips?: string[];
  deprecated?: boolean;
  experimental?: boolean;
  api_node?: boolean;
  [key: string]: unknown;
}

export type ObjectInfo = Record<string, NodeDefinition>;
