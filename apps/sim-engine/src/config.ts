/** Sim-engine settings, from options or SIM_* environment variables. */
import { tmpdir } from 'node:os';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';

export interface SimConfig {
  host: string;
  port: number;
  /** time per sampler step, ms */
  stepMs: number;
  /** delay before the server starts listening (connections are refused until then), ms */
  startupDelayMs: number;
  inputDir: string;
  outputDir: string;
  tempDir: string;
  /** VAEDecode output size = latent size * 8 * imageScale */
  imageScale: number;
  /** checkpoint names CheckpointLoaderSimple lists with no file behind them (stand-ins that load nothing) */
  checkpoints: string[];
  /**
   * The engine's `models` directory (`loras/`, `checkpoints/`, `embeddings/`, …): the loaders list
   * and open real files there. Undefined: only the stand-in checkpoints exist.
   */
  modelsDir: string | undefined;
  /**
   * A recorded `GET /object_info` (JSON file) whose classes are reported too, the sim's own
   * taking precedence: a real engine's full set of definitions, for clients and benchmarks that
   * read them. Those classes pass the API's validation but do not run here.
   */
  objectInfoFile: string | undefined;
  /** bytes, reported in /features and enforced on uploads */
  maxUploadSize: number;
  /** print log lines to stderr */
  logToStderr: boolean;
  /**
   * Extra, uninterruptible time per node class in ms (e.g. `{ImageBlur: 300}`), to mimic slow
   * nodes: the engine only notices an interrupt between nodes or at a progress update.
   */
  nodeDelays: Record<string, number>;
}

function parseNodeDelays(v: string | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const pair of (v ?? '').split(',')) {
    const [name, ms] = pair.split('=').map((s) => s.trim());
    if (name && ms !== undefined) out[name] = num(ms, 0);
  }
  return out;
}

export const DEFAULT_CHECKPOINTS = [
  'v1-5-pruned-emaonly-fp16.safetensors',
  'v1-5-pruned-emaonly.safetensors',
  'sim-checkpoint.safetensors',
];

function num(v: string | undefined, dflt: number): number {
  if (v === undefined || v.trim() === '') return dflt;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`not a number: ${v}`);
  return n;
}

export function resolveConfig(options: Partial<SimConfig> = {}, env: NodeJS.ProcessEnv = process.env): SimConfig {
  let base: string | undefined;
  const tempBase = (): string => (base ??= mkdtempSync(path.join(tmpdir(), 'sim-engine-')));
  const outputDir = options.outputDir ?? env.SIM_OUTPUT_DIR ?? path.join(tempBase(), 'output');
  const inputDir = options.inputDir ?? env.SIM_INPUT_DIR ?? path.join(tempBase(), 'input');
  const tempDir = options.tempDir ?? env.SIM_TEMP_DIR ?? path.join(tempBase(), 'temp');
  return {
    host: options.host ?? env.SIM_ENGINE_HOST ?? '127.0.0.1',
    port: options.port ?? num(env.SIM_ENGINE_PORT, 8188),
    stepMs: options.stepMs ?? num(env.SIM_STEP_MS, 20),
    startupDelayMs: options.startupDelayMs ?? num(env.SIM_STARTUP_DELAY_MS, 0),
    inputDir: path.resolve(inputDir),
    outputDir: path.resolve(outputDir),
    tempDir: path.resolve(tempDir),
    imageScale: options.imageScale ?? num(env.SIM_IMAGE_SCALE, 1),
    checkpoints: options.checkpoints ?? (env.SIM_CHECKPOINTS ? env.SIM_CHECKPOINTS.split(',').map((s) => s.trim()).filter(Boolean) : DEFAULT_CHECKPOINTS),
    modelsDir: options.modelsDir ?? (env.SIM_MODELS_DIR ? path.resolve(env.SIM_MODELS_DIR) : undefined),
    objectInfoFile: options.objectInfoFile ?? (env.SIM_OBJECT_INFO_FILE || undefined),
    maxUploadSize: options.maxUploadSize ?? num(env.SIM_MAX_UPLOAD_SIZE, 100 * 1024 * 1024),
    logToStderr: options.logToStderr ?? env.SIM_LOG_STDERR !== '0',
    nodeDelays: options.nodeDelays ?? parseNodeDelays(env.SIM_NODE_DELAYS),
  };
}
