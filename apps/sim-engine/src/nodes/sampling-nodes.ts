/**
 * The stock text-to-image chain with cheap stand-ins: no weights, the "sample" is a
 * deterministic pattern from the seed and the prompt texts.
 */
import sharp from 'sharp';
import type { ImageBatch } from '../image.js';
import { def } from './image-nodes.js';
import type { NodeContext, PreviewImage, SimNode } from './types.js';
import { embeddingMentions } from '#libs/models';
import { weightsOf } from './loader-nodes.js';
import { hash32, type ConditioningValue, type LatentValue, type ModelValue } from './values.js';

type Sample = NonNullable<LatentValue['sample']>;

function channelParams(sample: Sample): number[] {
  const h = hash32(`${sample.seed}|${sample.positive}|${sample.negative}|${sample.cfg}|${sample.steps}|${sample.denoise}|${sample.model}`);
  const p: number[] = [];
  let x = h || 1;
  for (let i = 0; i < 12; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    p.push((x >>> 0) / 4294967296);
  }
  return p;
}

/** Pixel noise from integer hashing: deterministic and cheap. */
function noise(x: number, y: number, seed: number, c: number): number {
  let h = Math.imul(x, 374761393) + Math.imul(y, 668265263) + Math.imul(seed, 2246822519) + c * 3266489917;
  h = Math.imul(h ^ (h >>> 13), 1274126177);
  return ((h ^ (h >>> 16)) >>> 0) / 4294967296;
}

/** `progress` 0..1 blends noise into the final pattern, like a denoising preview. */
export function renderSample(sample: Sample | null, width: number, height: number, progress: number): Float32Array {
  const out = new Float32Array(width * height * 3);
  const p = sample ? channelParams(sample) : new Array<number>(12).fill(0.5);
  const seed = sample?.seed ?? 0;
  for (let y = 0; y < height; y++) {
    const v = y / height;
    for (let x = 0; x < width; x++) {
      const u = x / width;
      for (let c = 0; c < 3; c++) {
        const f1 = 1 + p[c * 4]! * 4;
        const f2 = 1 + p[c * 4 + 1]! * 4;
        const pattern = 0.5 + 0.5 * Math.sin(2 * Math.PI * (f1 * u + p[c * 4 + 2]!)) * Math.cos(2 * Math.PI * (f2 * v + p[c * 4 + 3]!));
        const n = noise(x, y, seed, c);
        out[(y * width + x) * 3 + c] = progress * pattern + (1 - progress) * n;
      }
    }
  }
  return out;
}

/**
 * The sampler's preview of a step, as the engine sends it: the latent decoded at its own size
 * (the engine's Latent2RGB previewer, 1/8 of the image) and encoded as JPEG at quality 95
 * (latent_preview.py and server.py). The engine then scales it to fit 512 px; these stay at latent
 * size, which keeps each step cheap here.
 */
async function preview(sample: Sample, latent: LatentValue, progress: number): Promise<PreviewImage> {
  const w = Math.max(1, Math.round(latent.width / 8));
  const h = Math.max(1, Math.round(latent.height / 8));
  const rgb = renderSample(sample, w, h, progress);
  const data = Buffer.alloc(w * h * 3);
  for (let i = 0; i < data.length; i++) data[i] = Math.min(255, Math.max(0, Math.floor(rgb[i]! * 255)));
  return { format: 'JPEG', data: await sharp(data, { raw: { width: w, height: h, channels: 3 } }).jpeg({ quality: 95 }).toBuffer() };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The prompt's conditioning. Embeddings the text names (`embedding:<name>`) are loaded as the
 * engine's tokenizer does: found and readable, they change the conditioning; missing or broken,
 * the engine logs a warning and goes on without them.
 */
const clipTextEncode: SimNode = {
  definition: () => def('CLIPTextEncode'),
  async execute(inputs, ctx) {
    const text = String(inputs.text);
    const loaded: string[] = [];
    for (const mention of embeddingMentions(text)) {
      const candidate = mention.candidates.find((c) => ctx.storage.models.embeddingPath(c) !== null);
      const file = candidate === undefined ? null : ctx.storage.models.embeddingPath(candidate);
      if (!file) {
        ctx.log(`warning, embedding:${mention.word} does not exist, ignoring`);
        continue;
      }
      try {
        loaded.push(await weightsOf(file));
      } catch {
        ctx.log(`error loading embedding, skipping loading: ${mention.word}`);
      }
    }
    const hash = hash32(loaded.length > 0 ? `${text}|${loaded.join(',')}` : text);
    return { outputs: [{ kind: 'CONDITIONING', text, hash } satisfies ConditioningValue] };
  },
};

const emptyLatentImage: SimNode = {
  definition: () => def('EmptyLatentImage'),
  execute: (inputs) => ({
    outputs: [{ kind: 'LATENT', width: Number(inputs.width), height: Number(inputs.height), batch: Number(inputs.batch_size), sample: null } satisfies LatentValue],
  }),
};

const kSampler: SimNode = {
  definition: () => def('KSampler'),
  async execute(inputs, ctx: NodeContext) {
    const latent = inputs.latent_image as LatentValue;
    const steps = Number(inputs.steps);
    const sample: Sample = {
      seed: Number(BigInt.asUintN(32, typeof inputs.seed === 'bigint' ? inputs.seed : BigInt(Math.trunc(Number(inputs.seed))))),
      positive: (inputs.positive as ConditioningValue).hash,
      negative: (inputs.negative as ConditioningValue).hash,
      cfg: Number(inputs.cfg),
      steps,
      denoise: Number(inputs.denoise),
      model: (inputs.model as ModelValue).checkpoint,
    };
    for (let step = 0; step < steps; step++) {
      await sleep(ctx.config.stepMs);
      ctx.progress(step + 1, steps, await preview(sample, latent, (step + 1) / steps));
    }
    return { outputs: [{ ...latent, sample } satisfies LatentValue] };
  },
};

const vaeDecode: SimNode = {
  definition: () => def('VAEDecode'),
  execute(inputs, ctx) {
    const latent = inputs.samples as LatentValue;
    const width = Math.max(1, Math.round(latent.width * ctx.config.imageScale));
    const height = Math.max(1, Math.round(latent.height * ctx.config.imageScale));
    const frames: Float32Array[] = [];
    for (let i = 0; i < latent.batch; i++) {
      const sample = latent.sample ? { ...latent.sample, seed: latent.sample.seed + i } : null;
      frames.push(renderSample(sample, width, height, latent.sample ? 1 : 0));
    }
    return { outputs: [{ kind: 'IMAGE', width, height, frames } satisfies ImageBatch] };
  },
};

export const SAMPLING_NODES: Record<string, SimNode> = {
  CLIPTextEncode: clipTextEncode,
  EmptyLatentImage: emptyLatentImage,
  KSampler: kSampler,
  VAEDecode: vaeDecode,
};
