/**
 * A tiny FLAC encoder: 16-bit samples in VERBATIM subframes (no compression).
 * Valid FLAC that any decoder plays; enough for SaveAudio's output.
 */
import { createHash } from 'node:crypto';

const BLOCK = 4096;

function crc8(buf: Uint8Array): number {
  let crc = 0;
  for (const byte of buf) {
    crc ^= byte;
    for (let i = 0; i < 8; i++) crc = crc & 0x80 ? ((crc << 1) ^ 0x07) & 0xff : (crc << 1) & 0xff;
  }
  return crc;
}

function crc16(buf: Uint8Array): number {
  let crc = 0;
  for (const byte of buf) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x8005) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** FLAC's UTF-8-like coding of the frame number. */
function codedNumber(n: number): number[] {
  if (n < 0x80) return [n];
  if (n < 0x800) return [0xc0 | (n >> 6), 0x80 | (n & 0x3f)];
  if (n < 0x10000) return [0xe0 | (n >> 12), 0x80 | ((n >> 6) & 0x3f), 0x80 | (n & 0x3f)];
  return [0xf0 | (n >> 18), 0x80 | ((n >> 12) & 0x3f), 0x80 | ((n >> 6) & 0x3f), 0x80 | (n & 0x3f)];
}

/** `channels[c][i]` are float samples in [-1, 1]. */
export function encodeFlac(channels: Float32Array[], sampleRate: number): Buffer {
  const nch = channels.length;
  const total = channels[0]?.length ?? 0;
  const pcm = channels.map((ch) => Int16Array.from(ch, (v) => Math.max(-32768, Math.min(32767, Math.round(v * 32767)))));

  const md5 = createHash('md5');
  const interleaved = Buffer.alloc(total * nch * 2);
  for (let i = 0; i < total; i++) for (let c = 0; c < nch; c++) interleaved.writeInt16LE(pcm[c]![i]!, (i * nch + c) * 2);
  md5.update(interleaved);

  const info = Buffer.alloc(34);
  info.writeUInt16BE(BLOCK, 0);
  info.writeUInt16BE(BLOCK, 2);
  // bytes 4..9: min/max frame size unknown (0)
  // 20 bits rate, 3 bits channels-1, 5 bits bps-1, 36 bits total samples
  const hi = (sampleRate << 12) | ((nch - 1) << 9) | (15 << 4) | Math.floor(total / 2 ** 32);
  info.writeUInt32BE(hi >>> 0, 10);
  info.writeUInt32BE(total >>> 0, 14);
  md5.digest().copy(info, 18);
  const header = Buffer.alloc(4);
  header[0] = 0x80; // last metadata block, type STREAMINFO
  header.writeUIntBE(34, 1, 3);

  const frames: Buffer[] = [];
  for (let start = 0, frameNo = 0; start < total || (total === 0 && frameNo === 0); start += BLOCK, frameNo++) {
    const size = Math.min(BLOCK, total - start);
    if (size <= 0) break;
    const head = [0xff, 0xf8, ((size === BLOCK ? 0b1100 : 0b0111) << 4) | 0b0000, ((nch - 1) << 4) | (0b100 << 1), ...codedNumber(frameNo)];
    if (size !== BLOCK) head.push(((size - 1) >> 8) & 0xff, (size - 1) & 0xff);
    head.push(crc8(Uint8Array.from(head)));
    const body = Buffer.alloc(nch * (1 + size * 2));
    let o = 0;
    for (let c = 0; c < nch; c++) {
      body[o++] = 0b00000010; // VERBATIM subframe, no wasted bits
      for (let i = 0; i < size; i++, o += 2) body.writeInt16BE(pcm[c]![start + i]!, o);
    }
    const frame = Buffer.concat([Buffer.from(head), body]);
    const crc = Buffer.alloc(2);
    crc.writeUInt16BE(crc16(frame), 0);
    frames.push(frame, crc);
  }
  return Buffer.concat([Buffer.from('fLaC', 'latin1'), header, info, ...frames]);
}
