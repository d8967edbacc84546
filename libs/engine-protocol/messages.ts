/**
 * WebSocket text messages of the engine protocol, as ComfyUI 0.3.64 sends them.
 * Every message is `{type, data}`. Types this library does not know arrive as
 * `UnknownEngineMessage` so a client never breaks on a newer engine.
 */

export type NodeId = string;

export interface QueueInfo {
  exec_info: { queue_remaining: number };
}

/** `sid` is only present in the first status message after connecting. */
export interface StatusMessage {
  type: 'status';
  data: { status: QueueInfo; sid?: string };
}

export interface FeatureFlags {
  supports_preview_metadata?: boolean;
  max_upload_size?: number;
  [flag: string]: unknown;
}

export interface FeatureFlagsMessage {
  type: 'feature_flags';
  data: FeatureFlags;
}

export interface ExecutionStartMessage {
  type: 'execution_start';
  data: { prompt_id: string; timestamp: number };
}

export interface ExecutionCachedMessage {
  type: 'execution_cached';
  data: { nodes: NodeId[]; prompt_id: string; timestamp: number };
}

/**
 * `node: null` marks the end of a prompt (then `display_node` is absent).
 * On reconnect of the executing client the engine sends `{node}` alone.
 */
export interface ExecutingMessage {
  type: 'executing';
  data: { node: NodeId | null; display_node?: NodeId; prompt_id?: string };
}

export interface ProgressMessage {
  type: 'progress';
  data: { value: number; max: number; prompt_id: string; node: NodeId };
}

export type NodeProgressStateName = 'pending' | 'running' | 'finished' | 'error';

export interface NodeProgressState {
  value: number;
  max: number;
  state: NodeProgressStateName;
  node_id: NodeId;
  prompt_id: string;
  display_node_id: NodeId;
  parent_node_id: NodeId | null;
  real_node_id: NodeId;
}

export interface ProgressStateMessage {
  type: 'progress_state';
  data: { prompt_id: string; nodes: Record<NodeId, NodeProgressState> };
}

/** A file a node produced, as `/view` expects it. */
export interface OutputFileRef {
  filename: string;
  subfolder: string;
  type: 'output' | 'temp' | 'input' | string;
}

/**
 * A node's UI output: `images`, `audio`, `text`, `animated`, ... Keys depend on
 * the node; the values are lists.
 */
export type NodeUiOutput = Record<string, unknown[]>;

export interface ExecutedMessage {
  type: 'executed';
  /** `output` is null when a cached node had no UI output. */
  data: { node: NodeId; display_node: NodeId; output: NodeUiOutput | null; prompt_id: string };
}

export interface ExecutionSuccessMessage {
  type: 'execution_success';
  data: { prompt_id: string; timestamp: number };
}

export interface ExecutionErrorData {
  prompt_id: string;
  node_id: NodeId;
  node_type: string;
  executed: NodeId[];
  exception_message: string;
  exception_type: string;
  traceback: string[];
  current_inputs: Record<string, unknown[]> | unknown[];
  current_outputs: NodeId[];
  timestamp: number;
}

export interface ExecutionErrorMessage {
  type: 'execution_error';
  data: ExecutionErrorData;
}

export interface ExecutionInterruptedData {
  prompt_id: string;
  node_id: NodeId;
  node_type: string;
  executed: NodeId[];
  timestamp: number;
}

export interface ExecutionInterruptedMessage {
  type: 'execution_interrupted';
  data: ExecutionInterruptedData;
}

export interface NotificationMessage {
  type: 'notification';
  data: { value: string; id?: string };
}

export interface LogEntry {
  /** ISO timestamp */
  t: string;
  /** raw text as written, often ending in a newline */
  m: string;
}

export interface LogsMessage {
  type: 'logs';
  /** the engine sends `size: null` when the terminal size did not change */
  data: { entries: LogEntry[]; size: { cols: number; rows: number } | null };
}

export interface UnknownEngineMessage {
  type: string;
  data: unknown;
}

export type KnownEngineMessage =
  | StatusMessage
  | FeatureFlagsMessage
  | ExecutionStartMessage
  | ExecutionCachedMessage
  | ExecutingMessage
  | ProgressMessage
  | ProgressStateMessage
  | ExecutedMessage
  | ExecutionSuccessMessage
  | ExecutionErrorMessage
  | ExecutionInterruptedMessage
  | NotificationMessage
  | LogsMessage;

export type EngineMessageType = KnownEngineMessage['type'];

export type EngineMessage = KnownEngineMessage | UnknownEngineMessage;

export const KNOWN_MESSAGE_TYPES: readonly EngineMessageType[] = [
  'status',
  'feature_flags',
  'execution_start',
  'execution_cached',
  'executing',
  'progress',
  'progress_state',
  'executed',
  'execution_success',
  'execution_error',
  'execution_interrupted',
  'notification',
  'logs',
];

/** Narrow a parsed message to a known type. */
export function isMessageOfType<T extends EngineMessageType>(
  msg: EngineMessage,
  type: T,
): msg is Extract<KnownEngineMessage, { type: T }> {
  return msg.type === type;
}

export function isKnownMessage(msg: EngineMessage): msg is KnownEngineMessage {
  return (KNOWN_MESSAGE_TYPES as readonly string[]).includes(msg.type);
}

/** Message types that end a prompt's run (besides `executing` with `node: null`). */
export const TERMINAL_MESSAGE_TYPES = ['execution_success', 'execution_error', 'execution_interrupted'] as const;

/**
 * Parse one text frame. Returns null for text that is not a `{type, data}` object,
 * which a tolerant client ignores.
 */
export function parseEngineMessage(text: string): EngineMessage | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const obj = parsed as Record<string, unknown>;
  if (typeof obj.type !== 'string') return null;
  return { type: obj.type, data: obj.data } as EngineMessage;
}

/** The `prompt_id` a message refers to, if any. */
export function messagePromptId(msg: EngineMessage): string | undefined {
  const data = msg.data;
  if (typeof data === 'object' && data !== null && 'prompt_id' in data) {
    const id = (data as { prompt_id?: unknown }).prompt_id;
    return typeof id === 'string' ? id : undefined;
  }
  return undefined;
}
