/** Test nodes of our own (class names prefixed `Sim`); not part of a real engine. */
import { createWriteStream, writeFileSync } from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import type { NodeDefinition } from '#libs/engine-protocol';
import jpeg from 'jpeg-js';
import { encodeMjpegAvi } from '../avi.js';
import { toRawRgba, type ImageBatch } from '../image.js';
import { counterName } from '../storage.js';
import { NodeException, type SimNode } from './types.js';
import { prng, type AudioValue } from './values.js';

interface SimDefinitionSpec {
  name: string;
  display: string;
  required: Record<string, unknown[]>;
  optional?: Record<string, unknown[]>;
  output?: string[];
  outputNames?: string[];
  outputNode: boolean;
  description: string;
}

function simDefinition(spec: SimDefinitionSpec): NodeDefinition {
  const output = spec.output ?? [];
  const input: NodeDefinition['input'] = { required: spec.required };
  const order: NodeDefinition['input_order'] = { required: Object.keys(spec.required) };
  if (spec.optional) {
    input.optional = spec.optional;
    order.optional = Object.keys(spec.optional);
  }
  return {
    input,
    input_order: order,
    output,
    output_is_list: output.map(() => false),
    output_name: spec.outputNames ?? output,
    name: spec.name,
    display_name: spec.display,
    description: spec.description,
    python_module: 'custom_nodes.sim_engine',
    category: 'sim',
    output_node: spec.outputNode,
  };
}

const SLICE_MS = 10;

const simSleep: SimNode = {
  definition: () =>
    simDefinition({
      name: 'SimSleep',
      display: 'Sim Sleep',
      description: 'Sleeps for `ms` milliseconds (interruptible), then passes `source` through.',
      required: { ms: ['INT', { default: 1000, min: 0, max: 3600000, step: 1 }] },
      optional: { source: ['*', {}] },
      output: ['*'],
      outputNames: ['source'],
      outputNode: true,
    }),
  isChanged: () => 'always',
  async execute(inputs, ctx) {
    const end = Date.now() + Number(inputs.ms);
    for (;;) {
      ctx.throwIfInterrupted();
      const left = end - Date.now();
      if (left <= 0) break;
      await new Promise((r) => setTimeout(r, Math.min(SLICE_MS, left)));
    }
    ctx.throwIfInterrupted();
    ctx.sendText(`slept ${Number(inputs.ms)} ms`);
    return { outputs: [inputs.source ?? null], ui: {} };
  },
};

const simFail: SimNode = {
  definition: () =>
    simDefinition({
      name: 'SimFail',
      display: 'Sim Fail',
      description: 'Raises an exception of the given type and message when executed.',
      required: {
        exception_type: ['STRING', { default: 'RuntimeError', multiline: false }],
        message: ['STRING', { default: 'simulated failure', multiline: true }],
      },
      optional: { source: ['*', {}] },
      outputNode: true,
    }),
  isChanged: () => 'always',
  execute(inputs) {
    throw new NodeException(String(inputs.exception_type || 'RuntimeError'), String(inputs.message), [
      '  File "custom_nodes/sim_engine.py", line 1, in execute\n    raise exception_type(message)\n',
    ]);
  },
};

/** Writes `size_bytes` of deterministic bytes chunk by chunk, never holding the whole file. */
const simLargeFile: SimNode = {
  definition: () =>
    simDefinition({
      name: 'SimLargeFile',
      display: 'Sim Large File',
      description: 'Writes an output file of `size_bytes` bytes, streamed to disk. UI output key: `files`.',
      required: {
        size_bytes: ['INT', { default: 1048576, min: 0, max: 1099511627776, step: 1 }],
        filename_prefix: ['STRING', { default: 'sim_large' }],
        seed: ['INT', { default: 0, min: 0, max: 4294967295 }],
      },
      optional: { source: ['*', {}] },
      outputNode: true,
    }),
  isChanged: () => 'always',
  async execute(inputs, ctx) {
    const size = Number(inputs.size_bytes);
    const { folder, filename, counter, subfolder } = ctx.storage.savePath(String(inputs.filename_prefix), ctx.storage.outputDir);
    const file = counterName(filename, counter, 'bin');
    const out = createWriteStream(path.join(folder, file));
    const CHUNK = 64 * 1024;
    // one pseudo-random block per seed, stamped with the chunk index: cheap and deterministic
    const rand = prng(Number(inputs.seed));
    const block = Buffer.alloc(CHUNK);
    for (let i = 0; i < CHUNK; i += 4) block.writeUInt32LE(Math.floor(rand() * 4294967296), i);
    let written = 0;
    try {
      for (let index = 0; written < size; index++) {
        ctx.throwIfInterrupted();
        const n = Math.min(CHUNK, size - written);
        const buf = Buffer.from(block.subarray(0, n));
        if (n >= 8) buf.writeBigUInt64LE(BigInt(index), 0);
        written += n;
        if (!out.write(buf)) await once(out, 'drain');
      }
    } finally {
      out.end();
      await once(out, 'close');
    }
    return { outputs: [], ui: { files: [{ filename: file, subfolder, type: 'output' }] } };
  },
};

const simAudioTone: SimNode = {
  definition: () =>
    simDefinition({
      name: 'SimAudioTone',
      display: 'Sim Audio Tone',
      description: 'A sine tone as AUDIO (feed SaveAudio / PreviewAudio).',
      required: {
        seconds: ['FLOAT', { default: 1.0, min: 0.01, max: 600.0, step: 0.01 }],
        frequency: ['FLOAT', { default: 440.0, min: 1.0, max: 20000.0, step: 1.0 }],
        sample_rate: ['INT', { default: 44100, min: 8000, max: 192000 }],
      },
      output: ['AUDIO'],
      outputNode: false,
    }),
  execute(inputs) {
    const rate = Number(inputs.sample_rate);
    const n = Math.max(1, Math.round(Number(inputs.seconds) * rate));
    const freq = Number(inputs.frequency);
    const ch = new Float32Array(n);
    for (let i = 0; i < n; i++) ch[i] = 0.5 * Math.sin((2 * Math.PI * freq * i) / rate);
    return { outputs: [{ kind: 'AUDIO', sampleRate: rate, channels: [ch] } satisfies AudioValue] };
  },
};

/** A real video output: the batch as a Motion-JPEG AVI, reported like the engine's video savers. */
const simSaveVideo: SimNode = {
  definition: () =>
    simDefinition({
      name: 'SimSaveVideo',
      display: 'Sim Save Video',
      description: 'Writes the image batch as a Motion-JPEG AVI (one frame per image). UI output key: `images`, with `animated`.',
      required: {
        images: ['IMAGE', {}],
        filename_prefix: ['STRING', { default: 'video/ComfyUI' }],
        fps: ['FLOAT', { default: 8.0, min: 0.01, max: 120.0, step: 0.01 }],
      },
      outputNode: true,
    }),
  execute(inputs, ctx) {
    const images = inputs.images as ImageBatch;
    const frames = images.frames.map((_, i) => {
      const raw = toRawRgba(images, i, undefined);
      return Buffer.from(jpeg.encode({ data: Buffer.from(raw.data), width: raw.width, height: raw.height }, 85).data);
    });
    const { folder, filename, counter, subfolder } = ctx.storage.savePath(String(inputs.filename_prefix), ctx.storage.outputDir, images.width, images.height);
    const file = counterName(filename, counter, 'avi');
    writeFileSync(path.join(folder, file), encodeMjpegAvi(frames, images.width, images.height, Number(inputs.fps)));
    return { outputs: [], ui: { images: [{ filename: file, subfolder, type: 'output' }], animated: [true] } };
  },
};

export const SIM_NODES: Record<string, SimNode> = {
  SimSaveVideo: simSaveVideo,
  SimSleep: simSleep,
  SimFail: simFail,
  SimLargeFile: simLargeFile,
  SimAudioTone: simAudioTone,
};
