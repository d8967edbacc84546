/** Image nodes with the engine's class names: EmptyImage, LoadImage, ImageScale, ImageInvert, ImageBlur, Save/Preview. */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import jpeg from 'jpeg-js';
import type { NodeDefinition } from '#libs/engine-protocol';
import { blurImage, fromRaw, mapImage, scaleImage, solidImage, toRaw, type ImageBatch, type MaskBatch } from '../image.js';
import { decodePng, encodeApng, encodePng, isPng, type RawImage } from '../png.js';
import { counterName } from '../storage.js';
import { ENGINE_NODE_DEFINITIONS } from './engine-definitions.js';
import { pngInfo, saveImages, tempPrefix } from './save.js';
import { NodeException, type SimNode } from './types.js';
import { sha256 } from './values.js';

export function def(name: string): NodeDefinition {
  const d = ENGINE_NODE_DEFINITIONS[name];
  if (!d) throw new Error(`no definition for ${name}`);
  // the recorded definitions had free-text descriptions removed; the engine always sends one
  return { ...structuredClone(d), description: d.description ?? '' };
}

/** A definition whose combo input lists come from the environment. */
function withCombo(name: string, input: string, values: string[]): NodeDefinition {
  const d = def(name);
  const spec = d.input.required![input]!;
  spec[0] = values;
  return d;
}

/** Decode a PNG or JPEG file; anything else fails like PIL does. */
export function readImageFile(filePath: string): RawImage {
  const buf = readFileSync(filePath);
  try {
    if (isPng(buf)) return decodePng(buf);
    if (buf[0] === 0xff && buf[1] === 0xd8) {
      const j = jpeg.decode(buf, { useTArray: true, formatAsRGBA: false });
      return { width: j.width, height: j.height, channels: 3, data: j.data };
    }
  } catch {
    // fall through to the engine's error
  }
  throw new NodeException('PIL.UnidentifiedImageError', `cannot identify image file '${filePath}'`, [
    '  File "ComfyUI/nodes.py", line 1647, in load_image\n    img = node_helpers.pillow(Image.open, image_path)\n',
  ]);
}

const asImage = (v: unknown): ImageBatch => v as ImageBatch;

const emptyImage: SimNode = {
  definition: () => def('EmptyImage'),
  execute(inputs) {
    const color = Number(inputs.color);
    const rgb: [number, number, number] = [((color >> 16) & 0xff) / 255, ((color >> 8) & 0xff) / 255, (color & 0xff) / 255];
    return { outputs: [solidImage(Number(inputs.width), Number(inputs.height), Number(inputs.batch_size), rgb)] };
  },
};

const imageInvert: SimNode = {
  definition: () => def('ImageInvert'),
  execute: (inputs) => ({ outputs: [mapImage(asImage(inputs.image), (v) => 1 - v)] }),
};

const imageScale: SimNode = {
  definition: () => def('ImageScale'),
  execute: (inputs) => ({
    outputs: [scaleImage(asImage(inputs.image), Number(inputs.width), Number(inputs.height), String(inputs.upscale_method), String(inputs.crop))],
  }),
};

const imageBlur: SimNode = {
  definition: () => def('ImageBlur'),
  execute: (inputs) => ({ outputs: [blurImage(asImage(inputs.image), Number(inputs.blur_radius), Number(inputs.sigma))] }),
};

function loadImageValidate(inputs: Record<string, unknown>, storage: import('../storage.js').Storage): true | string {
  const image = String(inputs.image);
  return storage.inputExists(image) ? true : `Invalid image file: ${image}`;
}

const loadImage: SimNode = {
  definition: (env) => withCombo('LoadImage', 'image', env.inputImages),
  isChanged: (inputs, storage) => {
    try {
      return sha256(readFileSync(storage.inputPath(String(inputs.image))));
    } catch {
      return 'missing';
    }
  },
  validate: { inputs: ['image'], fn: loadImageValidate },
  execute(inputs, ctx) {
    const raw = readImageFile(ctx.storage.inputPath(String(inputs.image)));
    const { rgb, alpha } = fromRaw(raw);
    const mask: MaskBatch = alpha
      ? { kind: 'MASK', width: raw.width, height: raw.height, frames: [alpha.map((a) => 1 - a)] }
      : { kind: 'MASK', width: 64, height: 64, frames: [new Float32Array(64 * 64)] };
    return { outputs: [{ kind: 'IMAGE', width: raw.width, height: raw.height, frames: [rgb] } satisfies ImageBatch, mask] };
  },
};

const loadImageMask: SimNode = {
  definition: (env) => withCombo('LoadImageMask', 'image', env.inputImages),
  isChanged: loadImage.isChanged,
  validate: { inputs: ['image'], fn: loadImageValidate },
  execute(inputs, ctx) {
    const raw = readImageFile(ctx.storage.inputPath(String(inputs.image)));
    const { rgb, alpha } = fromRaw(raw);
    const channel = String(inputs.channel);
    const n = raw.width * raw.height;
    const m = new Float32Array(n);
    for (let p = 0; p < n; p++) {
      if (channel === 'alpha') m[p] = alpha ? 1 - alpha[p]! : 0;
      else m[p] = rgb[p * 3 + (channel === 'red' ? 0 : channel === 'green' ? 1 : 2)]!;
    }
    return { outputs: [{ kind: 'MASK', width: raw.width, height: raw.height, frames: [m] } satisfies MaskBatch] };
  },
};

const saveImage: SimNode = {
  definition: () => def('SaveImage'),
  execute: (inputs, ctx) => ({ outputs: [], ui: { images: saveImages(asImage(inputs.images), String(inputs.filename_prefix ?? 'ComfyUI'), 'output', ctx, 4) } }),
};

const previewImage: SimNode = {
  definition: () => def('PreviewImage'),
  execute: (inputs, ctx) => ({ outputs: [], ui: { images: saveImages(asImage(inputs.images), tempPrefix(), 'temp', ctx, 1) } }),
};

/** Sends each image as a PNG preview through the progress hook, like the engine's example node. */
const saveImageWebsocket: SimNode = {
  definition: () => def('SaveImageWebsocket'),
  isChanged: () => 'always',
  execute(inputs, ctx) {
    const images = asImage(inputs.images);
    images.frames.forEach((_, i) => {
      ctx.progress(i, images.frames.length, { format: 'PNG', data: encodePng(toRaw(images, i), { compressLevel: 1 }) });
    });
    return { outputs: [], ui: {} };
  },
};

/** Video-ish output: an animated PNG of the batch. */
const saveAnimatedPng: SimNode = {
  definition: () => def('SaveAnimatedPNG'),
  execute(inputs, ctx) {
    const images = asImage(inputs.images);
    const { folder, filename, counter, subfolder } = ctx.storage.savePath(String(inputs.filename_prefix ?? 'ComfyUI'), ctx.storage.outputDir, images.width, images.height);
    const file = counterName(filename, counter, 'png');
    const frames = images.frames.map((_, i) => toRaw(images, i));
    writeFileSync(
      path.join(folder, file),
      encodeApng(frames, Number(inputs.fps ?? 6), { compressLevel: Number(inputs.compress_level ?? 4), text: pngInfo(ctx) }),
    );
    return { outputs: [], ui: { images: [{ filename: file, subfolder, type: 'output' }], animated: [true] } };
  },
};

export const IMAGE_NODES: Record<string, SimNode> = {
  EmptyImage: emptyImage,
  ImageInvert: imageInvert,
  ImageScale: imageScale,
  ImageBlur: imageBlur,
  LoadImage: loadImage,
  LoadImageMask: loadImageMask,
  SaveImage: saveImage,
  PreviewImage: previewImage,
  SaveImageWebsocket: saveImageWebsocket,
  SaveAnimatedPNG: saveAnimatedPng,
};
