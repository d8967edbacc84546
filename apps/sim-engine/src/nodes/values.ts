/** Values that flow along links between simulated nodes. */
import { createHash } from 'node:crypto';

export interface ModelValue { kind: 'MODEL'; checkpoint: string }
export interface ClipValue { kind: 'CLIP'; checkpoint: string }
export interface VaeValue { kind: 'VAE'; checkpoint: string }
export interface ConditioningValue { kind: 'CONDITIONING'; text: string; hash: number }
export interface LatentValue {
  kind: 'LATENT';
  width: number;
  height: number;
  batch: number;
  /** null until a sampler ran */
  sample: { seed: number; positive: number; negative: number; cfg: number; steps: number; denoise: number; model: string } | null;
}
export interface AudioValue { kind: 'AUDIO'; sampleRate: number; channels: Float32Array[] }

/** 32-bit FNV-1a, for turning text into pattern parameters. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function sha256(buf: Buffer | string): string {
  return createHash('sha256').update(buf).digest('hex');
}

/** Small deterministic PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** How the engine shows a non-primitive input in execution_error.current_inputs (format_value). */
export function describeValue(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'object' && 'kind' in v) {
    const k = (v as { kind: string }).kind;
    if (k === 'IMAGE' || k === 'MASK') {
      const b = v as unknown as { width: number; height: number; frames: unknown[] };
      return k === 'IMAGE' ? `tensor of shape [${b.frames.length}, ${b.height}, ${b.width}, 3]` : `tensor of shape [${b.frames.length}, ${b.height}, ${b.width}]`;
    }
    return `<${k}>`;
  }
  return String(v);
}
