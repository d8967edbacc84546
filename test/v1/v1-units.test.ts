import { deflateSync } from 'node:zlib';
import type { WebSocket } from 'ws';
import { decodePng, encodePng, pngChunk } from '../../apps/api/src/v1/images/png.js';
import { applyMaskAlpha } from '../../apps/api/src/v1/images/mask.js';
import { parseFileValue } from '../../apps/api/src/v1/files/file-names.js';
import { v1ExceptionType, v1Status } from '../../apps/api/src/v1/jobs/v1-status.js';
import { MAX_BUFFERED_BYTES, PREVIEW_DROP_BYTES } from '../../apps/api/src/jobs/slow-readers.js';
import { ClientSocket } from '../../apps/api/src/v1/ws/client-socket.js';


/** A PNG from already-filtered scanlines (filter byte 0 each), any colour type and depth. */
function rawPng(width: number, height: number, depth: number, colorType: number, lines: Buffer[], extra: Buffer[] = [], interlace = 0): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = depth;
  ihdr[9] = colorType;
  ihdr[12] = interlace;
  const body = Buffer.concat(lines.map((l) => Buffer.concat([Buffer.from([0]), l])));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), pngChunk('IHDR', ihdr), ...extra, pngChunk('IDAT', deflateSync(body)), pngChunk('IEND', Buffer.alloc(0))]);
}

describe('v1 PNG codec', () => {
  it('round-trips RGBA with text metadata', () => {
    const rgba = Uint8Array.from({ length: 3 * 2 * 4 }, (_, i) => (i * 17) & 0xff);
    const png = encodePng({ width: 3, height: 2, rgba, text: [['prompt', '{"a": 1}'], ['note', 'ünïcode ✓']] });
    const back = decodePng(png);
    expect([back.width, back.height]).toEqual([3, 2]);
    expect(Buffer.from(back.rgba).equals(Buffer.from(rgba))).toBe(true);
    expect(back.text).toEqual([['prompt', '{"a": 1}'], ['note', 'ünïcode ✓']]);
  });

  it('reads palette images with transparency at 4 bits, 16-bit grey and Adam7-interlaced images', () => {
    const palette = pngChunk('PLTE', Buffer.from([255, 0, 0, 0, 255, 0, 0, 0, 255]));
    const trns = pngChunk('tRNS', Buffer.from([128]));
    const pal = decodePng(rawPng(3, 1, 4, 3, [Buffer.from([0x01, 0x20])], [palette, trns]));
    expect([...pal.rgba]).toEqual([255, 0, 0, 128, 0, 255, 0, 255, 0, 0, 255, 255]);
    const grey = decodePng(rawPng(2, 1, 16, 0, [Buffer.from([0xab, 0xcd, 0x12, 0x34])]));
    expect([...grey.rgba]).toEqual([0xab, 0xab, 0xab, 255, 0x12, 0x12, 0x12, 255]);
    // A 2x2 RGB image interlaced: pass 1 holds (0,0), pass 6 holds (1,0), pass 7 holds row 1.
    const interlaced = rawPng(2, 2, 8, 2, [Buffer.from([1, 2, 3]), Buffer.from([4, 5, 6]), Buffer.from([7, 8, 9, 10, 11, 12])], [], 1);
    expect([...decodePng(interlaced).rgba]).toEqual([1, 2, 3, 255, 4, 5, 6, 255, 7, 8, 9, 255, 10, 11, 12, 255]);
  });

  it('refuses what it cannot read instead of failing later', () => {
    expect(() => decodePng(Buffer.from('not a png'))).toThrow('not a PNG');
    const huge = rawPng(1, 1, 8, 2, [Buffer.from([1, 2, 3])]);
    huge.writeUInt32BE(100_000, 16); // claim 100000x1... and beyond the pixel limit below
    huge.writeUInt32BE(100_000, 20);
    expect(() => decodePng(huge)).toThrow();
    expect(() => applyMaskAlpha(Buffer.from('GIF89a'), encodePng({ width: 1, height: 1, rgba: new Uint8Array(4) }))).toThrow('only PNG and JPEG');
  });
});

describe('v1 names, statuses and exception types', () => {
  it('parses the file values clients send', () => {
    const hash = 'a'.repeat(64);
    const job = '0f9a3c1e-2b4d-4e6f-8a0b-1c2d3e4f5a6b';
    expect(parseFileValue(`${hash}.png`)).toEqual({ kind: 'upload', hash });
    expect(parseFileValue(`clipspace/${hash}.png [input]`)).toEqual({ kind: 'upload', hash });
    expect(parseFileValue(`${job}/ComfyUI_00001_.png [output]`)).toEqual({ kind: 'output', jobId: job, name: 'ComfyUI_00001_.png', type: 'output' });
    expect(parseFileValue('ComfyUI_00001_.png', 'temp', job)).toEqual({ kind: 'output', jobId: job, name: 'ComfyUI_00001_.png', type: 'temp' });
    expect(parseFileValue('example.png')).toBeNull();
  });

  it('maps job states and failures as decisions.md says', () => {
    expect(v1Status({ status: 'queued', error: null })).toBe('queued_waiting');
    expect(v1Status({ status: 'running', error: null })).toBe('executing');
    expect(v1Status({ status: 'canceling', error: null })).toBe('cancel_requested');
    expect(v1Status({ status: 'succeeded', error: null })).toBe('success');
    expect(v1Status({ status: 'canceled', error: null })).toBe('cancelled');
    expect(v1Status({ status: 'expired', error: null })).toBe('lost');
    expect(v1Status({ status: 'failed', error: { code: 'node_execution_error', exception_type: 'RuntimeError' } })).toBe('error');
    expect(v1Status({ status: 'failed', error: { code: 'prompt_rejected' } })).toBe('non_retryable_error');
    // The engine's own type whenever the engine raised the error; ours only for what it never saw.
    expect(v1ExceptionType({ code: 'node_execution_error', exception_type: 'torch.cuda.OutOfMemoryError', class_type: 'KSampler' })).toBe('torch.cuda.OutOfMemoryError');
    expect(v1ExceptionType({ code: 'node_execution_error', exception_type: 'PIL.UnidentifiedImageError', class_type: 'LoadImage' })).toBe('PIL.UnidentifiedImageError');
    expect(v1ExceptionType({ code: 'node_execution_error', exception_type: 'FileNotFoundError', class_type: 'CheckpointLoaderSimple' })).toBe('FileNotFoundError');
    expect(v1ExceptionType({ code: 'missing_asset' })).toBe('ValidationError');
    expect(v1ExceptionType({ code: 'prompt_rejected' })).toBe('ValidationError');
    expect(v1ExceptionType({ code: 'execution_timeout' })).toBe('TimeoutError');
    expect(v1ExceptionType({ code: 'engine_unavailable' })).toBe('RuntimeError');
  });
});

describe('v1 socket memory bound', () => {
  function fakeSocket() {
    const sent: unknown[] = [];
    const closed: Array<[number, string]> = [];
    const ws = {
      OPEN: 1,
      readyState: 1,
      bufferedAmount: 0,
      send: (data: unknown) => sent.push(data),
      close: (code: number, reason: string) => closed.push([code, reason]),
      terminate: () => undefined,
    };
    return { ws, sent, closed, client: new ClientSocket(ws as unknown as WebSocket, 'sid') };
  }

  it('drops previews for a slow reader first, then closes it with 1008', () => {
    const { ws, sent, closed, client } = fakeSocket();
    client.sendExpendable(Buffer.from('frame'));
    client.sendText('{"type":"progress"}');
    expect(sent).toHaveLength(2);
    ws.bufferedAmount = PREVIEW_DROP_BYTES + 1;
    client.sendExpendable(Buffer.from('frame'));
    client.sendText('{"type":"executed"}');
    expect(sent).toHaveLength(3);
    ws.bufferedAmount = MAX_BUFFERED_BYTES + 1;
    client.sendText('{"type":"executed"}');
    expect(sent).toHaveLength(3);
    expect(closed).toEqual([[1008, 'client is not reading its messages']]);
  });

  it('closes a client that floods the server with messages', () => {
    const { closed, client } = fakeSocket();
    let accepted = 0;
    for (let i = 0; i < 500; i++) if (client.countIncoming()) accepted++;
    expect(accepted).toBe(200);
    expect(closed[0]![0]).toBe(1008);
  });
});
