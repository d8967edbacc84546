/** Writing node outputs the way the engine names them. */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomInt } from 'node:crypto';
import { pythonJsonDumps, type OutputFileRef } from '#libs/engine-protocol';
import { encodePng } from '../png.js';
import { toRaw, type ImageBatch } from '../image.js';
import { counterName } from '../storage.js';
import type { NodeContext } from './types.js';

/** tEXt chunks the engine embeds: the prompt, then each extra_pnginfo key. */
export function pngInfo(ctx: NodeContext): Array<[string, string]> {
  const text: Array<[string, string]> = [['prompt', pythonJsonDumps(ctx.prompt)]];
  const extra = ctx.extraData.extra_pnginfo;
  if (extra && typeof extra === 'object') {
    for (const [k, v] of Object.entries(extra as Record<string, unknown>)) text.push([k, pythonJsonDumps(v)]);
  }
  return text;
}

export function tempPrefix(): string {
  const letters = 'abcdefghijklmnopqrstupvxyz';
  let s = '';
  for (let i = 0; i < 5; i++) s += letters[randomInt(letters.length)];
  return 'ComfyUI_temp_' + s;
}

export function saveImages(
  images: ImageBatch,
  filenamePrefix: string,
  type: 'output' | 'temp',
  ctx: NodeContext,
  compressLevel: number,
): OutputFileRef[] {
  const base = type === 'output' ? ctx.storage.outputDir : ctx.storage.tempDir;
  const { folder, filename, subfolder } = ctx.storage.savePath(filenamePrefix, base, images.width, images.height);
  let { counter } = ctx.storage.savePath(filenamePrefix, base, images.width, images.height);
  const text = pngInfo(ctx);
  const refs: OutputFileRef[] = [];
  for (let i = 0; i < images.frames.length; i++) {
    const file = counterName(filename.replace('%batch_num%', String(i)), counter, 'png');
    writeFileSync(path.join(folder, file), encodePng(toRaw(images, i), { compressLevel, text }));
    refs.push({ filename: file, subfolder, type });
    counter++;
  }
  return refs;
}
