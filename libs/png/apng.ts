// Animated PNG (APNG): pngjs writes still images only, so each frame is encoded by it and its
// compressed image data is moved into the animation's chunks (fcTL before each frame, the first
// frame's data as IDAT, the others' as fdAT with a sequence number).
import { afterHeader, pngChunk, PNG_SIGNATURE, readChunks, textChunk } from './chunks.js';
import { encodePng, type PngEncodeOptions, type RawImage } from './codec.js';

/** An animation looping forever at `fps`; every frame has the first frame's size and channels. */
export function encodeApng(frames: RawImage[], fps: number, opts: PngEncodeOptions = {}): Buffer {
  const first = frames[0]!;
  const stills = frames.map((frame) => readChunks(encodePng(frame, { compressLevel: opts.compressLevel })));
  const header = stills[0]!.find((c) => c.type === 'IHDR')!.data;
  const actl = Buffer.alloc(8);
  actl.writeUInt32BE(frames.length, 0);
  actl.writeUInt32BE(0, 4); // loop forever
  // The delay of each frame as a fraction: num/den seconds.
  const num = Math.max(1, Math.round(1000 / Math.max(0.01, fps)));
  const den = 1000;
  const parts: Buffer[] = [PNG_SIGNATURE, pngChunk('IHDR', header), pngChunk('acTL', actl)];
  let seq = 0;
  stills.forEach((chunks, i) => {
    const fctl = Buffer.alloc(26);
    fctl.writeUInt32BE(seq++, 0);
    fctl.writeUInt32BE(first.width, 4);
    fctl.writeUInt32BE(first.height, 8);
    fctl.writeUInt16BE(num, 20);
    fctl.writeUInt16BE(den, 22);
    parts.push(pngChunk('fcTL', fctl));
    for (const { data } of chunks.filter((c) => c.type === 'IDAT')) {
      if (i === 0) parts.push(pngChunk('IDAT', data));
      else {
        const sequence = Buffer.alloc(4);
        sequence.writeUInt32BE(seq++, 0);
        parts.push(pngChunk('fdAT', Buffer.concat([sequence, data])));
      }
    }
  });
  parts.push(pngChunk('IEND', Buffer.alloc(0)));
  return afterHeader(Buffer.concat(parts), (opts.text ?? []).map(([key, value]) => textChunk(key, value)));
}
