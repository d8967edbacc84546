/** Audio output nodes (SaveAudio, PreviewAudio) writing real FLAC files. */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { OutputFileRef } from '#libs/engine-protocol';
import { encodeFlac } from '../flac.js';
import { counterName } from '../storage.js';
import { def } from './image-nodes.js';
import { tempPrefix } from './save.js';
import { NodeException, type NodeContext, type SimNode } from './types.js';
import type { AudioValue } from './values.js';

function saveAudio(audio: AudioValue, prefix: string, type: 'output' | 'temp', ctx: NodeContext): OutputFileRef[] {
  const base = type === 'output' ? ctx.storage.outputDir : ctx.storage.tempDir;
  const { folder, filename, counter, subfolder } = ctx.storage.savePath(prefix, base);
  const file = counterName(filename.replace('%batch_num%', '0'), counter, 'flac');
  writeFileSync(path.join(folder, file), encodeFlac(audio.channels, audio.sampleRate));
  return [{ filename: file, subfolder, type }];
}

/** A RIFF/WAVE file's samples (PCM 8/16/24/32-bit or 32-bit float); anything else fails as the engine's decoder does. */
function decodeWav(filePath: string): AudioValue {
  const buf = readFileSync(filePath);
  const fail = () => {
    throw new NodeException('av.error.InvalidDataError', `[Errno 1094995529] Invalid data found when processing input: '${filePath}'`, [
      '  File "comfy_extras/nodes_audio.py", line 1, in load\n    waveform, sample_rate = load(audio_path)\n',
    ]);
  };
  if (buf.length < 12 || buf.toString('latin1', 0, 4) !== 'RIFF' || buf.toString('latin1', 8, 12) !== 'WAVE') fail();
  let format = 0, channels = 0, sampleRate = 0, bits = 0;
  for (let at = 12; at + 8 <= buf.length; ) {
    const id = buf.toString('latin1', at, at + 4);
    const size = buf.readUInt32LE(at + 4);
    const body = at + 8;
    if (id === 'fmt ' && size >= 16) {
      format = buf.readUInt16LE(body);
      channels = buf.readUInt16LE(body + 2);
      sampleRate = buf.readUInt32LE(body + 4);
      bits = buf.readUInt16LE(body + 14);
    } else if (id === 'data' && channels > 0) {
      const width = bits / 8;
      const frames = Math.floor(Math.min(size, buf.length - body) / (width * channels));
      const out = Array.from({ length: channels }, () => new Float32Array(frames));
      for (let f = 0; f < frames; f++) {
        for (let c = 0; c < channels; c++) {
          const o = body + (f * channels + c) * width;
          let v: number;
          if (format === 3 && bits === 32) v = buf.readFloatLE(o);
          else if (bits === 8) v = (buf[o]! - 128) / 128;
          else if (bits === 16) v = buf.readInt16LE(o) / 32768;
          else if (bits === 24) v = buf.readIntLE(o, 3) / 8388608;
          else if (bits === 32) v = buf.readInt32LE(o) / 2147483648;
          else return fail();
          out[c]![f] = v;
        }
      }
      return { kind: 'AUDIO', sampleRate, channels: out };
    }
    at = body + size + (size % 2);
  }
  return fail();
}

export const AUDIO_NODES: Record<string, SimNode> = {
  LoadAudio: {
    definition: (env) => {
      const d = def('LoadAudio');
      d.input.required!.audio![0] = env.inputAudio;
      return d;
    },
    isChanged: (inputs, storage) => {
      try {
        return createHash('sha256').update(readFileSync(storage.inputPath(String(inputs.audio)))).digest('hex');
      } catch {
        return 'missing';
      }
    },
    validate: {
      inputs: ['audio'],
      fn: (inputs, storage) => (storage.inputExists(String(inputs.audio)) ? true : `Invalid audio file: ${String(inputs.audio)}`),
    },
    execute: (i, ctx) => ({ outputs: [decodeWav(ctx.storage.inputPath(String(i.audio)))] }),
  },
  SaveAudio: {
    definition: () => def('SaveAudio'),
    execute: (i, ctx) => ({ outputs: [], ui: { audio: saveAudio(i.audio as AudioValue, String(i.filename_prefix ?? 'audio/ComfyUI'), 'output', ctx) } }),
  },
  PreviewAudio: {
    definition: () => def('PreviewAudio'),
    execute: (i, ctx) => ({ outputs: [], ui: { audio: saveAudio(i.audio as AudioValue, tempPrefix(), 'temp', ctx) } }),
  },
};
