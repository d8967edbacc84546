import { readFileSync } from 'node:fs';
import type { RunningProcess } from './processes.js';
import type { TestStack } from './stack.js';

export const TEXT_TO_IMAGE = JSON.parse(readFileSync('test/fixtures/text-to-image.json', 'utf8')) as Record<string, any>;

/** The stock text-to-image workflow, small and quick: 64x64, a given seed and step count. */
export function textToImage(seed = 1, steps = 4): Record<string, any> {
  const wf = structuredClone(TEXT_TO_IMAGE);
  wf['3'].inputs.seed = seed;
  wf['3'].inputs.steps = steps;
  wf['5'].inputs.width = 64;
  wf['5'].inputs.height = 64;
  return wf;
}

/** The smallest workflow with an output: an 8x8 image, saved. */
export function tinyImage(color = 0): Record<string, any> {
  return {
    '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color } },
    '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'tiny' } },
  };
}

/** Sleeps on the engine for `ms`, then saves an image: a job that stays running for a while. */
export function slowJob(ms: number, color = 0): Record<string, any> {
  return {
    '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color } },
    '2': { class_type: 'SimSleep', inputs: { source: ['1', 0], ms } },
    '3': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'slow' } },
  };
}

export interface Cloud {
  api: RunningProcess;
  engines: RunningProcess[];
  workers: RunningProcess[];
}

/** API plus N workers, each with its own sim-engine, all on this stack's database and Redis prefix. */
export async function startCloud(
  stack: TestStack,
  opts: { workers?: number; api?: Record<string, string>; engine?: Record<string, string>; worker?: Record<string, string> } = {},
): Promise<Cloud> {
  const engines: RunningProcess[] = [];
  const workers: RunningProcess[] = [];
  for (let i = 0; i < (opts.workers ?? 1); i++) {
    const engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: '0', SIM_STEP_MS: '20', ...opts.engine });
    engines.push(engine);
    workers.push(await stack.start('apps/worker/src/main.js', { ENGINE_URL: engine.url, WORKER_PORT: '0', WORKER_ID: `w${i + 1}-${stack.name}`, ...opts.worker }, 'ready'));
  }
  const api = await stack.startApi(opts.api);
  return { api, engines, workers };
}
