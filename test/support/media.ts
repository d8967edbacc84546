/** Small media helpers for tests: reading what a file carries, making inputs. */

/** The text chunks (tEXt) of a PNG file, keyword and text, in order. */
export function pngTextChunks(png: Buffer): Array<[string, string]> {
  const text: Array<[string, string]> = [];
  for (let at = 8; at + 12 <= png.length; ) {
    const length = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    if (type === 'tEXt') {
      const data = png.subarray(at + 8, at + 8 + length);
      const nul = data.indexOf(0);
      text.push([data.toString('latin1', 0, nul), data.toString('latin1', nul + 1)]);
    }
    at += 12 + length;
  }
  return text;
}

/** A mono 16-bit PCM WAV file holding a sine tone of `seconds`. */
export function wavTone(seconds: number, rate = 8000, hz = 440): Buffer {
  const frames = Math.round(seconds * rate);
  const data = Buffer.alloc(frames * 2);
  for (let i = 0; i < frames; i++) data.writeInt16LE(Math.round(Math.sin((2 * Math.PI * hz * i) / rate) * 12000), i * 2);
  const head = Buffer.alloc(44);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(36 + data.length, 4);
  head.write('WAVEfmt ', 8, 'latin1');
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(1, 20);
  head.writeUInt16LE(1, 22);
  head.writeUInt32LE(rate, 24);
  head.writeUInt32LE(rate * 2, 28);
  head.writeUInt16LE(2, 32);
  head.writeUInt16LE(16, 34);
  head.write('data', 36, 'latin1');
  head.writeUInt32LE(data.length, 40);
  return Buffer.concat([head, data]);
}

/**
 * An engine's PNG output as a tenant receives it: the same bytes, but for the prompt text chunk,
 * which holds the workflow the tenant sent instead of the one the engine ran (apps/worker png-prompt).
 */
export async function asTenantPng(enginePng: Buffer, workflow: unknown): Promise<Buffer> {
  const { Readable } = await import('node:stream');
  const { PngPromptRewriter } = await import('../../apps/worker/src/png-prompt.js');
  const { pythonJsonDumps } = await import('#libs/engine-protocol');
  const out: Buffer[] = [];
  for await (const chunk of Readable.from([enginePng]).pipe(new PngPromptRewriter(pythonJsonDumps(workflow)))) out.push(chunk as Buffer);
  return Buffer.concat(out);
}
