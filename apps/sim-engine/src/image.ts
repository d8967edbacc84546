/** Image batches as nodes pass them around: float RGB in [0, 1], like the engine's tensors. */
import type { RawImage } from './png.js';

export interface ImageBatch {
  kind: 'IMAGE';
  width: number;
  height: number;
  /** one Float32Array of width*height*3 per image */
  frames: Float32Array[];
}

export interface MaskBatch {
  kind: 'MASK';
  width: number;
  height: number;
  /** one Float32Array of width*height per mask */
  frames: Float32Array[];
}

export function solidImage(width: number, height: number, batch: number, rgb: [number, number, number]): ImageBatch {
  const frames: Float32Array[] = [];
  for (let i = 0; i < batch; i++) {
    const f = new Float32Array(width * height * 3);
    for (let p = 0; p < width * height; p++) {
      f[p * 3] = rgb[0];
      f[p * 3 + 1] = rgb[1];
      f[p * 3 + 2] = rgb[2];
    }
    frames.push(f);
  }
  return { kind: 'IMAGE', width, height, frames };
}

export function mapImage(img: ImageBatch, fn: (v: number) => number): ImageBatch {
  return { ...img, frames: img.frames.map((f) => f.map(fn)) };
}

/** The engine's conversion: clip(255 * x) truncated to uint8. */
export function toRaw(img: ImageBatch, index: number): RawImage {
  const f = img.frames[index]!;
  const data = new Uint8Array(f.length);
  for (let i = 0; i < f.length; i++) data[i] = Math.min(255, Math.max(0, Math.floor(255 * f[i]!)));
  return { width: img.width, height: img.height, channels: 3, data };
}

export function toRawRgba(img: ImageBatch, index: number, alpha: Float32Array | undefined): RawImage {
  const f = img.frames[index]!;
  const n = img.width * img.height;
  const data = new Uint8Array(n * 4);
  for (let p = 0; p < n; p++) {
    for (let c = 0; c < 3; c++) data[p * 4 + c] = Math.min(255, Math.max(0, Math.floor(255 * f[p * 3 + c]!)));
    data[p * 4 + 3] = alpha ? Math.min(255, Math.max(0, Math.floor(255 * alpha[p]!))) : 255;
  }
  return { width: img.width, height: img.height, channels: 4, data };
}

export function fromRaw(raw: RawImage): { rgb: Float32Array; alpha: Float32Array | undefined } {
  const n = raw.width * raw.height;
  const rgb = new Float32Array(n * 3);
  const alpha = raw.channels === 4 || raw.channels === 2 ? new Float32Array(n) : undefined;
  for (let p = 0; p < n; p++) {
    if (raw.channels >= 3) {
      for (let c = 0; c < 3; c++) rgb[p * 3 + c] = raw.data[p * raw.channels + c]! / 255;
    } else {
      const v = raw.data[p * raw.channels]! / 255;
      rgb[p * 3] = rgb[p * 3 + 1] = rgb[p * 3 + 2] = v;
    }
    if (alpha) alpha[p] = raw.data[p * raw.channels + raw.channels - 1]! / 255;
  }
  return { rgb, alpha };
}

function sampleBilinear(f: Float32Array, w: number, h: number, x: number, y: number, c: number): number {
  const x0 = Math.max(0, Math.min(w - 1, Math.floor(x)));
  const y0 = Math.max(0, Math.min(h - 1, Math.floor(y)));
  const x1 = Math.min(w - 1, x0 + 1);
  const y1 = Math.min(h - 1, y0 + 1);
  const fx = Math.max(0, Math.min(1, x - x0));
  const fy = Math.max(0, Math.min(1, y - y0));
  const v00 = f[(y0 * w + x0) * 3 + c]!;
  const v10 = f[(y0 * w + x1) * 3 + c]!;
  const v01 = f[(y1 * w + x0) * 3 + c]!;
  const v11 = f[(y1 * w + x1) * 3 + c]!;
  return v00 * (1 - fx) * (1 - fy) + v10 * fx * (1 - fy) + v01 * (1 - fx) * fy + v11 * fx * fy;
}

/** Resize like ImageScale: a 0 dimension keeps the aspect ratio; `center` crops before scaling. */
export function scaleImage(img: ImageBatch, width: number, height: number, method: string, crop: string): ImageBatch {
  if (width === 0 && height === 0) return img;
  if (width === 0) width = Math.max(1, Math.round((img.width * height) / img.height));
  if (height === 0) height = Math.max(1, Math.round((img.height * width) / img.width));
  let sx = 0, sy = 0, sw = img.width, sh = img.height;
  if (crop === 'center') {
    const oldAspect = img.width / img.height;
    const newAspect = width / height;
    if (oldAspect > newAspect) {
      sw = Math.round(img.height * newAspect);
      sx = Math.floor((img.width - sw) / 2);
    } else if (oldAspect < newAspect) {
      sh = Math.round(img.width / newAspect);
      sy = Math.floor((img.height - sh) / 2);
    }
  }
  const frames = img.frames.map((f) => {
    const out = new Float32Array(width * height * 3);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const srcX = sx + ((x + 0.5) * sw) / width - 0.5;
        const srcY = sy + ((y + 0.5) * sh) / height - 0.5;
        for (let c = 0; c < 3; c++) {
          out[(y * width + x) * 3 + c] =
            method === 'nearest-exact'
              ? f[(Math.min(img.height - 1, Math.max(0, Math.round(srcY))) * img.width + Math.min(img.width - 1, Math.max(0, Math.round(srcX)))) * 3 + c]!
              : sampleBilinear(f, img.width, img.height, srcX, srcY, c);
        }
      }
    }
    return out;
  });
  return { kind: 'IMAGE', width, height, frames };
}

/**
 * Gaussian-like blur: three box-blur passes per axis with running sums, so the cost does not
 * grow with the radius (sigma picks the box width, clamped to the requested radius).
 */
export function blurImage(img: ImageBatch, radius: number, sigma: number): ImageBatch {
  const { width: w, height: h } = img;
  // box width for 3 passes approximating the gaussian's variance: w = sqrt(4*sigma^2 + 1)
  const r = Math.max(0, Math.min(radius, Math.round((Math.sqrt(4 * sigma * sigma + 1) - 1) / 2)));
  if (r === 0) return img;
  const frames = img.frames.map((f) => {
    const a = Float32Array.from(f);
    const b = new Float32Array(f.length);
    for (let pass = 0; pass < 3; pass++) {
      boxPass(a, b, w, h, r, true);
      boxPass(b, a, w, h, r, false);
    }
    return a;
  });
  return { ...img, frames };
}

/** One box blur along rows (horizontal) or columns, edges clamped. */
function boxPass(src: Float32Array, dst: Float32Array, w: number, h: number, r: number, horizontal: boolean): void {
  const lines = horizontal ? h : w;
  const len = horizontal ? w : h;
  const step = horizontal ? 3 : w * 3;
  const norm = 1 / (2 * r + 1);
  for (let line = 0; line < lines; line++) {
    const base = horizontal ? line * w * 3 : line * 3;
    for (let c = 0; c < 3; c++) {
      const at = (i: number): number => src[base + Math.min(len - 1, Math.max(0, i)) * step + c]!;
      let acc = 0;
      for (let i = -r; i <= r; i++) acc += at(i);
      for (let i = 0; i < len; i++) {
        dst[base + i * step + c] = acc * norm;
        acc += at(i + r + 1) - at(i - r);
      }
    }
  }
}
