/** Audio output nodes (SaveAudio, PreviewAudio) writing real FLAC files. */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { OutputFileRef } from '#libs/engine-protocol';
import { encodeFlac } from '../flac.js';
import { counterName } from '../storage.js';
import { def } from './image-nodes.js';
import { tempPrefix } from './save.js';
import type { NodeContext, SimNode } from './types.js';
import type { AudioValue } from './values.js';

function saveAudio(audio: AudioValue, prefix: string, type: 'output' | 'temp', ctx: NodeContext): OutputFileRef[] {
  const base = type === 'output' ? ctx.storage.outputDir : ctx.storage.tempDir;
  const { folder, filename, counter, subfolder } = ctx.storage.savePath(prefix, base);
  const file = counterName(filename.replace('%batch_num%', '0'), counter, 'flac');
  writeFileSync(path.join(folder, file), encodeFlac(audio.channels, audio.sampleRate));
  return [{ filename: file, subfolder, type }];
}

export const AUDIO_NODES: Record<string, SimNode> = {
  SaveAudio: {
    definition: () => def('SaveAudio'),
    execute: (i, ctx) => ({ outputs: [], ui: { audio: saveAudio(i.audio as AudioValue, String(i.filename_prefix ?? 'audio/ComfyUI'), 'output', ctx) } }),
  },
  PreviewAudio: {
    definition: () => def('PreviewAudio'),
    execute: (i, ctx) => ({ outputs: [], ui: { audio: saveAudio(i.audio as AudioValue, tempPrefix(), 'temp', ctx) } }),
  },
};
