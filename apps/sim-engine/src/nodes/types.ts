import type { ApiPrompt, NodeDefinition, NodeUiOutput } from '#libs/engine-protocol';
import type { SimConfig } from '../config.js';
import type { Storage } from '../storage.js';

/** A preview the sampler sends per step: encoded bytes and their format. */
export interface PreviewImage {
  format: 'JPEG' | 'PNG';
  data: Buffer;
}

export interface NodeContext {
  nodeId: string;
  promptId: string;
  prompt: ApiPrompt;
  extraData: Record<string, unknown>;
  config: SimConfig;
  storage: Storage;
  /** Report progress (the engine's ProgressBar hook). Throws when the prompt was interrupted. */
  progress(value: number, max: number, preview?: PreviewImage): void;
  /** Throws if an interrupt is pending (comfy.model_management.throw_exception_if_processing_interrupted). */
  throwIfInterrupted(): void;
  /** Binary TEXT frame (type 3) to the prompt's client. */
  sendText(text: string): void;
  log(message: string): void;
}

export interface NodeResult {
  /** one value per declared output */
  outputs: unknown[];
  ui?: NodeUiOutput;
}

export interface EnvironmentLists {
  inputImages: string[];
  inputAudio: string[];
  /** A model folder's file names (read once per snapshot of the definitions). */
  models(folder: string): string[];
}

export interface SimNode {
  /** `GET /object_info` entry; combos with file lists are filled from the environment */
  definition(env: EnvironmentLists): NodeDefinition;
  execute(inputs: Record<string, unknown>, ctx: NodeContext): Promise<NodeResult> | NodeResult;
  /**
   * The engine's IS_CHANGED: a value mixed into the cache key. `'always'` means never cached
   * (the engine's NaN / time.time()).
   */
  isChanged?(inputs: Record<string, unknown>, storage: Storage): string | 'always';
  /** VALIDATE_INPUTS: the names of inputs it takes; those skip the engine's own range/list checks. */
  validate?: { inputs: string[]; fn(inputs: Record<string, unknown>, storage: Storage): true | string };
}

/** A Python-like exception a node raises; becomes execution_error. */
export class NodeException extends Error {
  constructor(
    readonly exceptionType: string,
    message: string,
    readonly traceback: string[] = [],
  ) {
    super(message);
    this.name = exceptionType;
  }
}
