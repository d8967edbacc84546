/**
 * A Motion-JPEG AVI writer: the simplest real video container, playable by common players, for
 * the engine's video outputs (real ComfyUI writes H.264 MP4, which a CPU stand-in cannot afford).
 */

function chunk(id: string, data: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.write(id, 0, 'ascii');
  header.writeUInt32LE(data.length, 4);
  return Buffer.concat(data.length % 2 ? [header, data, Buffer.alloc(1)] : [header, data]);
}

function list(type: string, parts: Buffer[]): Buffer {
  return chunk('LIST', Buffer.concat([Buffer.from(type, 'ascii'), ...parts]));
}

export function encodeMjpegAvi(frames: Buffer[], width: number, height: number, fps: number): Buffer {
  const usPerFrame = Math.round(1_000_000 / Math.max(0.01, fps));
  const maxFrame = Math.max(0, ...frames.map((f) => f.length));

  const avih = Buffer.alloc(56);
  avih.writeUInt32LE(usPerFrame, 0); // microseconds per frame
  avih.writeUInt32LE(Math.round(maxFrame * fps), 4); // max bytes per second
  avih.writeUInt32LE(0x10, 12); // AVIF_HASINDEX
  avih.writeUInt32LE(frames.length, 16); // total frames
  avih.writeUInt32LE(1, 24); // streams
  avih.writeUInt32LE(maxFrame, 28); // suggested buffer size
  avih.writeUInt32LE(width, 32);
  avih.writeUInt32LE(height, 36);

  const strh = Buffer.alloc(56);
  strh.write('vids', 0, 'ascii');
  strh.write('MJPG', 4, 'ascii');
  strh.writeUInt32LE(usPerFrame, 20); // scale
  strh.writeUInt32LE(1_000_000, 24); // rate: rate/scale = fps
  strh.writeUInt32LE(frames.length, 32); // length
  strh.writeUInt32LE(maxFrame, 36);
  strh.writeInt32LE(-1, 40); // quality: default
  strh.writeUInt16LE(width, 52);
  strh.writeUInt16LE(height, 54);

  const strf = Buffer.alloc(40); // BITMAPINFOHEADER
  strf.writeUInt32LE(40, 0);
  strf.writeInt32LE(width, 4);
  strf.writeInt32LE(height, 8);
  strf.writeUInt16LE(1, 12); // planes
  strf.writeUInt16LE(24, 14); // bits per pixel
  strf.write('MJPG', 16, 'ascii');
  strf.writeUInt32LE(width * height * 3, 20);

  const hdrl = list('hdrl', [chunk('avih', avih), list('strl', [chunk('strh', strh), chunk('strf', strf)])]);
  const movieChunks = frames.map((f) => chunk('00dc', f));
  const movi = list('movi', movieChunks);

  // idx1 offsets count from the 'movi' fourcc.
  const index = Buffer.alloc(16 * frames.length);
  let offset = 4;
  movieChunks.forEach((c, i) => {
    index.write('00dc', i * 16, 'ascii');
    index.writeUInt32LE(0x10, i * 16 + 4); // AVIIF_KEYFRAME
    index.writeUInt32LE(offset, i * 16 + 8);
    index.writeUInt32LE(frames[i]!.length, i * 16 + 12);
    offset += c.length;
  });
  const body = Buffer.concat([Buffer.from('AVI ', 'ascii'), hdrl, movi, chunk('idx1', index)]);
  return chunk('RIFF', body);
}
