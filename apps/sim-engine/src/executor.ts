/**
 * Runs prompts one at a time with the engine's message sequence, caching and interrupt
 * semantics (execution.py PromptExecutor + main.py prompt_worker).
 */
import { randomUUID } from 'node:crypto';
import {
  encodePreviewImageFrame,
  encodePreviewImageWithMetadataFrame,
  encodeTextFrame,
  mimeToImageFormat,
  type ApiPrompt,
  type HistoryNodeMeta,
  type NodeProgressState,
  type NodeUiOutput,
  type QueueItem,
  type StatusMessageTuple,
} from '#libs/engine-protocol';
import type { SimConfig } from './config.js';
import { ExecutionList, isLink } from './execution-list.js';
import type { EngineLogs } from './logs.js';
import type { NodeRegistry } from './nodes/registry.js';
import { NodeException, type NodeContext, type PreviewImage } from './nodes/types.js';
import { describeValue } from './nodes/values.js';
import type { PromptQueue } from './queue.js';
import type { Storage } from './storage.js';
import type { WsHub } from './ws-hub.js';

class InterruptProcessingException extends Error {
  override name = 'InterruptProcessingException';
}

interface CachedOutput {
  outputs: unknown[];
}

interface UiEntry {
  meta: HistoryNodeMeta;
  output: NodeUiOutput;
}

type NodeOutcome = { ok: true } | { ok: false; interrupted: true } | { ok: false; interrupted: false; error: ErrorDetails };

interface ErrorDetails {
  exception_message: string;
  exception_type: string;
  traceback: string[];
  current_inputs: Record<string, unknown[]>;
}

const TB_EXECUTE = [
  '  File "ComfyUI/execution.py", line 496, in execute\n    output_data, output_ui, has_subgraph, has_pending_tasks = await get_output_data(prompt_id, unique_id, obj, input_data_all, execution_block_cb=execution_block_cb, pre_execute_cb=pre_execute_cb, hidden_inputs=hidden_inputs)\n',
  '  File "ComfyUI/execution.py", line 315, in get_output_data\n    return_values = await _async_map_node_over_list(prompt_id, unique_id, obj, input_data_all, obj.FUNCTION, allow_interrupt=True, execution_block_cb=execution_block_cb, pre_execute_cb=pre_execute_cb, hidden_inputs=hidden_inputs)\n',
  '  File "ComfyUI/execution.py", line 289, in _async_map_node_over_list\n    await process_inputs(input_dict, i)\n',
  '  File "ComfyUI/execution.py", line 277, in process_inputs\n    result = f(**inputs)\n             ^^^^^^^^^^^\n',
];

export class PromptExecutor {
  /** sid of the prompt being run (the engine's server.client_id); null = nobody's */
  clientId: string | null = null;
  lastNodeId: string | null = null;
  private interruptRequested = false;
  private readonly outputCache = new Map<string, CachedOutput>();
  private readonly uiCache = new Map<string, UiEntry>();
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly queue: PromptQueue,
    private readonly registry: NodeRegistry,
    private readonly hub: WsHub,
    private readonly logs: EngineLogs,
    private readonly storage: Storage,
    private readonly config: SimConfig,
  ) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.interruptRequested = true;
    this.abort.abort();
    await this.loop;
  }

  /** nodes.interrupt_processing(): takes effect at the next node or progress boundary. */
  interrupt(): void {
    this.interruptRequested = true;
  }

  private async run(): Promise<void> {
    while (!this.abort.signal.aborted) {
      const next = await this.queue.get(this.abort.signal);
      if (!next) return;
      const started = performance.now();
      const { item, taskId } = next;
      const result = await this.execute(item);
      this.queue.taskDone(taskId, result.history, {
        status_str: result.success ? 'success' : 'error',
        completed: result.success,
        messages: result.messages,
      });
      if (this.clientId !== null) this.hub.sendJson('executing', { node: null, prompt_id: item[1] }, this.clientId);
      this.logs.log(`Prompt executed in ${((performance.now() - started) / 1000).toFixed(2)} seconds`);
    }
  }

  private async execute(item: QueueItem): Promise<{
    success: boolean;
    messages: StatusMessageTuple[];
    history: { outputs: Record<string, NodeUiOutput>; meta: Record<string, HistoryNodeMeta> };
  }> {
    const [, promptId, prompt, extraData, executeOutputs] = item;
    this.interruptRequested = false;
    this.clientId = typeof extraData.client_id === 'string' ? extraData.client_id : null;
    const messages: StatusMessageTuple[] = [];
    const addMessage = (event: string, data: Record<string, unknown>, broadcast: boolean): void => {
      const full = { ...data, timestamp: Date.now() };
      messages.push([event, full]);
      if (this.clientId !== null || broadcast) this.hub.sendJson(event, full, this.clientId);
    };

    addMessage('execution_start', { prompt_id: promptId }, false);

    const signatures = this.signatures(prompt);
    const liveSignatures = new Set(signatures.values());
    for (const key of this.outputCache.keys()) if (!liveSignatures.has(key)) this.outputCache.delete(key);
    const liveUiKeys = new Set(Object.entries(prompt).map(([id, n]) => uiKey(id, n.class_type)));
    for (const key of this.uiCache.keys()) if (!liveUiKeys.has(key)) this.uiCache.delete(key);

    const cachedOutput = (id: string): CachedOutput | undefined => {
      const sig = signatures.get(id);
      return sig === undefined ? undefined : this.outputCache.get(sig);
    };
    const cachedNodes = Object.keys(prompt).filter((id) => cachedOutput(id) !== undefined);
    addMessage('execution_cached', { nodes: cachedNodes, prompt_id: promptId }, false);

    const progress = new ProgressRegistry(promptId, (nodes) => this.hub.sendJson('progress_state', { prompt_id: promptId, nodes }, this.clientId));
    const executed = new Set<string>();
    const list = new ExecutionList(
      prompt,
      (id) => cachedOutput(id) !== undefined,
      (id) => this.registry.definition(prompt[id]!.class_type)?.output_node === true,
    );
    for (const o of executeOutputs) list.addNode(o);

    let success = true;
    while (!list.isEmpty()) {
      const staged = list.stage();
      if ('cycle' in staged) {
        success = false;
        const nodeId = staged.cycle[0]!;
        addMessage(
          'execution_error',
          {
            prompt_id: promptId,
            node_id: nodeId,
            node_type: prompt[nodeId]!.class_type,
            executed: [...executed],
            exception_message: 'Dependency cycle detected',
            exception_type: 'graph.DependencyCycleError',
            traceback: [],
            current_inputs: [],
            current_outputs: Object.keys(prompt),
          },
          false,
        );
        break;
      }
      const nodeId = staged.nodeId;
      const outcome = await this.executeNode(nodeId, prompt, promptId, extraData, progress, executed, cachedOutput, signatures);
      if (!outcome.ok) {
        success = false;
        const base = { prompt_id: promptId, node_id: nodeId, node_type: prompt[nodeId]!.class_type, executed: [...executed] };
        if (outcome.interrupted) {
          this.logs.log('Processing interrupted');
          addMessage('execution_interrupted', base, true);
        } else {
          addMessage('execution_error', { ...base, ...outcome.error, current_outputs: Object.keys(prompt) }, false);
        }
        break;
      }
      list.complete();
    }
    if (success) addMessage('execution_success', { prompt_id: promptId }, false);

    const outputs: Record<string, NodeUiOutput> = {};
    const meta: Record<string, HistoryNodeMeta> = {};
    for (const [id, node] of Object.entries(prompt)) {
      const ui = this.uiCache.get(uiKey(id, node.class_type));
      if (ui) {
        outputs[id] = ui.output;
        meta[id] = ui.meta;
      }
    }
    this.lastNodeId = null;
    return { success, messages, history: { outputs, meta } };
  }

  private async executeNode(
    nodeId: string,
    prompt: ApiPrompt,
    promptId: string,
    extraData: Record<string, unknown>,
    progress: ProgressRegistry,
    executed: Set<string>,
    cachedOutput: (id: string) => CachedOutput | undefined,
    signatures: Map<string, string>,
  ): Promise<NodeOutcome> {
    const node = prompt[nodeId]!;
    const classType = node.class_type;
    if (cachedOutput(nodeId) !== undefined) {
      if (this.clientId !== null) {
        const ui = this.uiCache.get(uiKey(nodeId, classType));
        this.hub.sendJson('executed', { node: nodeId, display_node: nodeId, output: ui?.output ?? null, prompt_id: promptId }, this.clientId);
      }
      progress.finish(nodeId);
      return { ok: true };
    }

    const sim = this.registry.get(classType)!;
    const def = this.registry.definition(classType)!;
    progress.start(nodeId);
    const inputs = this.resolveInputs(node.inputs, cachedOutput);
    if (this.clientId !== null) {
      this.lastNodeId = nodeId;
      this.hub.sendJson('executing', { node: nodeId, display_node: nodeId, prompt_id: promptId }, this.clientId);
    }

    const clientId = this.clientId;
    const throwIfInterrupted = (): void => {
      if (this.interruptRequested) throw new InterruptProcessingException('Processing interrupted');
    };
    const ctx: NodeContext = {
      nodeId,
      promptId,
      prompt,
      extraData,
      config: this.config,
      storage: this.storage,
      throwIfInterrupted,
      log: (m) => this.logs.log(m),
      sendText: (text) => this.hub.sendBinary(encodeTextFrame(nodeId, text), clientId),
      progress: (value, max, preview?: PreviewImage) => {
        throwIfInterrupted();
        progress.update(nodeId, value, max);
        const mime = preview?.format === 'PNG' ? 'image/png' : 'image/jpeg';
        if (preview && this.hub.supportsPreviewMetadata(clientId)) {
          const metadata = { node_id: nodeId, prompt_id: promptId, display_node_id: nodeId, parent_node_id: null, real_node_id: nodeId, image_type: mime };
          this.hub.sendBinary(encodePreviewImageWithMetadataFrame(preview.data, metadata), clientId);
        }
        this.hub.sendJson('progress', { value, max, prompt_id: promptId, node: nodeId }, clientId);
        if (preview && !this.hub.supportsPreviewMetadata(clientId)) {
          this.hub.sendBinary(encodePreviewImageFrame(preview.data, mimeToImageFormat(mime)), clientId);
        }
      },
    };

    try {
      throwIfInterrupted(); // before_node_execution()
      const result = await sim.execute(inputs, ctx);
      const delay = this.config.nodeDelays[classType];
      if (delay) await new Promise((r) => setTimeout(r, delay));
      if (result.ui && Object.keys(result.ui).length > 0) {
        this.uiCache.set(uiKey(nodeId, classType), {
          meta: { node_id: nodeId, display_node: nodeId, parent_node: null, real_node_id: nodeId },
          output: result.ui,
        });
        if (this.clientId !== null) {
          this.hub.sendJson('executed', { node: nodeId, display_node: nodeId, output: result.ui, prompt_id: promptId }, this.clientId);
        }
      }
      const padded = def.output.map((_, i) => result.outputs[i]);
      this.outputCache.set(signatures.get(nodeId)!, { outputs: padded });
    } catch (err) {
      if (err instanceof InterruptProcessingException) return { ok: false, interrupted: true };
      const e = err as Error;
      const type = err instanceof NodeException ? err.exceptionType : pythonTypeOf(e);
      this.logs.log(`!!! Exception during processing !!! ${e.message}`);
      const currentInputs: Record<string, unknown[]> = {};
      for (const [k, v] of Object.entries(inputs)) currentInputs[k] = [describeValue(v)];
      return {
        ok: false,
        interrupted: false,
        error: {
          exception_message: `${e.message}\n`,
          exception_type: type,
          traceback: [...TB_EXECUTE, ...(err instanceof NodeException ? err.traceback : [`  File "sim-engine", in ${classType}\n    ${e.stack?.split('\n')[1]?.trim() ?? ''}\n`])],
          current_inputs: currentInputs,
        },
      };
    }
    progress.finish(nodeId);
    executed.add(nodeId);
    return { ok: true };
  }

  private resolveInputs(raw: Record<string, unknown>, cachedOutput: (id: string) => CachedOutput | undefined): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(raw)) {
      if (isLink(v)) {
        const cached = cachedOutput(v[0]);
        const idx = v[1] < 0 ? (cached?.outputs.length ?? 0) + v[1] : v[1];
        out[k] = cached?.outputs[idx];
      } else out[k] = v;
    }
    return out;
  }

  /**
   * Cache keys: class, IS_CHANGED and literal inputs of the node and all its ancestors.
   * A node whose IS_CHANGED says 'always' gets a unique key, so it never hits.
   */
  private signatures(prompt: ApiPrompt): Map<string, string> {
    const memo = new Map<string, string>();
    const visiting = new Set<string>();
    const sig = (id: string): string => {
      const known = memo.get(id);
      if (known !== undefined) return known;
      const node = prompt[id];
      if (!node || visiting.has(id)) return `missing:${randomUUID()}`;
      visiting.add(id);
      const sim = this.registry.get(node.class_type);
      let changed = '';
      if (sim?.isChanged) {
        const c = sim.isChanged(node.inputs, this.storage);
        changed = c === 'always' ? `always:${randomUUID()}` : c;
      }
      const inputs = Object.keys(node.inputs)
        .sort()
        .map((k) => {
          const v = node.inputs[k];
          return [k, isLink(v) ? { link: sig(v[0]), socket: v[1] } : v];
        });
      // Integers beyond 2^53 are BigInts by now (Python ints): written as their digits.
      const s = JSON.stringify([node.class_type, changed, inputs], (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
      visiting.delete(id);
      memo.set(id, s);
      return s;
    };
    for (const id of Object.keys(prompt)) sig(id);
    return memo;
  }
}

function uiKey(nodeId: string, classType: string): string {
  return `${nodeId}\u0000${classType}`;
}

function pythonTypeOf(e: Error): string {
  if (e instanceof RangeError) return 'ValueError';
  if (e instanceof TypeError) return 'TypeError';
  return e.name === 'Error' ? 'Exception' : e.name;
}

/** comfy_execution/progress.py: per-node state, every change sent as `progress_state`. */
class ProgressRegistry {
  private readonly nodes = new Map<string, { state: NodeProgressState['state']; value: number; max: number }>();

  constructor(
    private readonly promptId: string,
    private readonly send: (nodes: Record<string, NodeProgressState>) => void,
  ) {}

  private entry(id: string): { state: NodeProgressState['state']; value: number; max: number } {
    let e = this.nodes.get(id);
    if (!e) {
      e = { state: 'pending', value: 0, max: 1 };
      this.nodes.set(id, e);
    }
    return e;
  }

  start(id: string): void {
    Object.assign(this.entry(id), { state: 'running', value: 0, max: 1 });
    this.emit();
  }

  update(id: string, value: number, max: number): void {
    Object.assign(this.entry(id), { state: 'running', value, max });
    this.emit();
  }

  finish(id: string): void {
    const e = this.entry(id);
    e.state = 'finished';
    e.value = e.max;
    this.emit();
  }

  private emit(): void {
    const out: Record<string, NodeProgressState> = {};
    for (const [id, e] of this.nodes) {
      if (e.state === 'pending') continue;
      out[id] = {
        value: e.value,
        max: e.max,
        state: e.state,
        node_id: id,
        prompt_id: this.promptId,
        display_node_id: id,
        parent_node_id: null,
        real_node_id: id,
      };
    }
    this.send(out);
  }
}
