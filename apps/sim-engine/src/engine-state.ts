/** Everything the routes share: one instance per running sim-engine. */
import type { SimConfig } from './config.js';
import type { PromptExecutor } from './executor.js';
import type { EngineLogs } from './logs.js';
import type { NodeRegistry } from './nodes/registry.js';
import type { PromptQueue } from './queue.js';
import type { Storage } from './storage.js';
import type { PromptValidator } from './validation.js';
import type { WsHub } from './ws-hub.js';

export interface EngineState {
  config: SimConfig;
  storage: Storage;
  registry: NodeRegistry;
  validator: PromptValidator;
  queue: PromptQueue;
  executor: PromptExecutor;
  hub: WsHub;
  logs: EngineLogs;
  /** the engine's server.number: next queue number */
  nextNumber: number;
}

export const ENGINE_VERSION = '0.3.64';

export function queueInfo(state: EngineState): { exec_info: { queue_remaining: number } } {
  return { exec_info: { queue_remaining: state.queue.remaining() } };
}

export function serverFeatures(state: EngineState): { supports_preview_metadata: boolean; max_upload_size: number } {
  return { supports_preview_metadata: true, max_upload_size: state.config.maxUploadSize };
}
