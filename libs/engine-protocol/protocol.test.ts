import { describe, expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  decodeBinaryFrame,
  encodePreviewImageFrame,
  encodePreviewImageWithMetadataFrame,
  encodeTextFrame,
  FrameDecodeError,
  isMessageOfType,
  messagePromptId,
  parseEngineMessage,
  pythonJsonDumps,
} from './index.js';

// The recordings are test fixtures of this repository (test/fixtures/engine-transcripts/README.md).
const TRANSCRIPTS = fileURLToPath(new URL('../../test/fixtures/engine-transcripts', import.meta.url));
type Ev = { kind: string; body: unknown };
const load = (name: string): Ev[] => JSON.parse(readFileSync(`${TRANSCRIPTS}/${name}.json`, 'utf8')) as Ev[];

describe('binary frames', () => {
  test('decode the recorded legacy preview frames (type 1, PNG)', () => {
    const frames = load('05_progress_ws_legacy').filter((e) => e.kind === 'ws-binary');
    expect(frames).toHaveLength(3);
    for (const e of frames) {
      const f = decodeBinaryFrame(Buffer.from(String(e.body), 'base64'));
      expect(f).toMatchObject({ kind: 'preview_image', eventType: 1, imageFormat: 2, mimeType: 'image/png' });
      if (f.kind === 'preview_image') expect(f.image.subarray(1, 4).toString('latin1')).toBe('PNG');
    }
  });

  test('decode the recorded metadata preview frames (type 4) and re-encode them byte for byte', () => {
    const frames = load('06_progress_ws_preview_metadata').filter((e) => e.kind === 'ws-binary');
    expect(frames).toHaveLength(3);
    for (const e of frames) {
      const raw = Buffer.from(String(e.body), 'base64');
      const f = decodeBinaryFrame(raw);
      expect(f.kind).toBe('preview_image_with_metadata');
      if (f.kind !== 'preview_image_with_metadata') continue;
      expect(f.metadata).toEqual({ node_id: '3', prompt_id: '2b2f50d0-99f7-4af3-92bc-fb648bc367e6', display_node_id: '3', parent_node_id: null, real_node_id: '3', image_type: 'image/png' });
      expect(f.mimeType).toBe('image/png');
      // the metadata header is written exactly as the engine's json.dumps does
      expect(encodePreviewImageWithMetadataFrame(f.image, f.metadata).equals(raw)).toBe(true);
    }
  });

  test('round trips of types 1, 3, 4 and unknown types', () => {
    const img = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]);
    expect(decodeBinaryFrame(encodePreviewImageFrame(img, 1))).toEqual({ kind: 'preview_image', eventType: 1, imageFormat: 1, mimeType: 'image/jpeg', image: img });
    const text = encodeTextFrame('12', 'héllo');
    expect(text.readUInt32BE(0)).toBe(3);
    expect(text.readUInt32BE(4)).toBe(2);
    expect(decodeBinaryFrame(text)).toEqual({ kind: 'text', eventType: 3, nodeId: '12', text: 'héllo' });
    const meta = { node_id: '1', prompt_id: 'p', display_node_id: '1', parent_node_id: null, real_node_id: '1', image_type: 'image/jpeg' };
    const f4 = decodeBinaryFrame(encodePreviewImageWithMetadataFrame(img, meta));
    expect(f4).toEqual({ kind: 'preview_image_with_metadata', eventType: 4, metadata: meta, mimeType: 'image/jpeg', image: img });
    const unknown = Buffer.from([0, 0, 0, 9, 7, 7]);
    expect(decodeBinaryFrame(unknown)).toEqual({ kind: 'unknown', eventType: 9, payload: Buffer.from([7, 7]) });
    expect(() => decodeBinaryFrame(Buffer.from([0, 0]))).toThrow(FrameDecodeError);
    expect(() => decodeBinaryFrame(Buffer.from([0, 0, 0, 4, 0, 0, 1, 0]))).toThrow(FrameDecodeError);
  });
});

describe('text messages', () => {
  test('every recorded server text message parses, with prompt ids where the engine sends them', () => {
    const names = ['02_empty_invert_save', '05_progress_ws_legacy', '06_progress_ws_preview_metadata', '08_interrupt', '17_execution_error', '18_text_output', '19_no_client_id'];
    const types = new Set<string>();
    for (const name of names) {
      for (const e of load(name).filter((x) => x.kind === 'ws-text')) {
        const msg = parseEngineMessage(JSON.stringify(e.body));
        expect(msg).not.toBeNull();
        types.add(msg!.type);
        if (msg!.type.startsWith('execution_') || msg!.type === 'progress') expect(typeof messagePromptId(msg!)).toBe('string');
      }
    }
    expect([...types].sort()).toEqual(
      ['execution_cached', 'execution_error', 'execution_interrupted', 'execution_start', 'execution_success', 'executed', 'executing', 'feature_flags', 'progress', 'progress_state', 'status'].sort(),
    );
  });

  test('unknown message types are kept, garbage is ignored', () => {
    const m = parseEngineMessage('{"type":"crystools.monitor","data":{"cpu":3}}');
    expect(m).toEqual({ type: 'crystools.monitor', data: { cpu: 3 } });
    expect(parseEngineMessage('not json')).toBeNull();
    expect(parseEngineMessage('[1,2]')).toBeNull();
    expect(parseEngineMessage('{"data":1}')).toBeNull();
    const s = parseEngineMessage('{"type":"status","data":{"status":{"exec_info":{"queue_remaining":2}},"sid":"abc"}}')!;
    expect(isMessageOfType(s, 'status') && s.data.sid).toBe('abc');
  });

  test('pythonJsonDumps writes what the engine writes', () => {
    expect(pythonJsonDumps({ prompt_id: 'x', number: 0, node_errors: {} })).toBe('{"prompt_id": "x", "number": 0, "node_errors": {}}');
    expect(pythonJsonDumps(['é', null, true, 1.5, [], 18446744073709551615n])).toBe('["\\u00e9", null, true, 1.5, [], 18446744073709551615]');
  });
});
