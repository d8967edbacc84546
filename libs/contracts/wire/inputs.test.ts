import type { z } from 'zod';
import {
  AssetUploadFieldsSchema, V1HistoryQuerySchema, V1LogsSubscribeRequestSchema, V1MaskUploadFieldsSchema, V1UploadFieldsSchema, V1UserDataListQuerySchema,
  V1UserDataTreeQuerySchema, V1UserDataWriteQuerySchema, V1ViewMetadataQuerySchema, V1ViewQuerySchema,
} from '../index.js';

// The query and multipart-field schemas the handlers parse their input with: what each reads and
// how it words a refusal (the handler's renderer gives the refusal its surface's shape).

function parsed<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const result = schema.safeParse(value);
  if (!result.success) throw new Error(`refused: ${result.error.issues[0]!.message}`);
  return result.data;
}

function refusal(schema: z.ZodType, value: unknown): string {
  const result = schema.safeParse(value);
  if (result.success) throw new Error(`accepted: ${JSON.stringify(result.data)}`);
  return result.error.issues[0]!.message;
}

describe('v1 GET /api/history query', () => {
  it('reads integers as the engine\'s int() does, clamped to what the handler serves', () => {
    expect(parsed(V1HistoryQuerySchema, {})).toEqual({});
    expect(parsed(V1HistoryQuerySchema, { max_items: '5', offset: '0' })).toEqual({ max_items: 5, offset: 0 });
    expect(parsed(V1HistoryQuerySchema, { max_items: ' +7 ', offset: '1_000' })).toEqual({ max_items: 7, offset: 1000 });
    expect(parsed(V1HistoryQuerySchema, { max_items: '5000', offset: '99999999999999999999' })).toEqual({ max_items: 1000, offset: 1_000_000 });
    // Below zero: the engine answers nothing for max_items, and the newest page for offset.
    expect(parsed(V1HistoryQuerySchema, { max_items: '-3', offset: '-3' })).toEqual({ max_items: 0, offset: -1 });
    // The first of repeated values, as aiohttp's query.get reads it.
    expect(parsed(V1HistoryQuerySchema, { max_items: ['2', 'x'] })).toEqual({ max_items: 2 });
  });

  it('refuses what int() would fail on', () => {
    for (const bad of ['abc', '1e3', '0x10', '', ' ', '1__0', '_1', '1.5', ['x', '2']]) {
      expect(refusal(V1HistoryQuerySchema, { max_items: bad })).toBe('max_items must be an integer.');
    }
    expect(refusal(V1HistoryQuerySchema, { offset: 'later' })).toBe('offset must be an integer.');
  });
});

describe('v1 GET /api/view query', () => {
  it('reads the first filename, subfolder and type; an empty type is absent (output)', () => {
    expect(parsed(V1ViewQuerySchema, { filename: ['a.png', 'b.png'], subfolder: 'x', type: '' })).toEqual({ filename: 'a.png', subfolder: 'x' });
    expect(parsed(V1ViewQuerySchema, { filename: 'a.png', type: 'temp' })).toEqual({ filename: 'a.png', type: 'temp' });
  });

  it('refuses a missing or oversized name and an unknown folder type', () => {
    expect(refusal(V1ViewQuerySchema, {})).toBe('filename is required.');
    expect(refusal(V1ViewQuerySchema, { filename: '' })).toBe('filename is required.');
    expect(refusal(V1ViewQuerySchema, { filename: 'x'.repeat(1025) })).toBe('filename must be at most 1024 characters.');
    expect(refusal(V1ViewQuerySchema, { filename: 'a.png', subfolder: 'x'.repeat(1025) })).toBe('subfolder must be at most 1024 characters.');
    expect(refusal(V1ViewQuerySchema, { filename: 'a.png', type: 'models' })).toBe('type must be input, output or temp.');
  });
});

describe('v1 user-folder queries', () => {
  it('reads flags as the engine does: true only for "true" in any case, the first of repeated values', () => {
    expect(parsed(V1UserDataListQuerySchema, { dir: 'workflows', recurse: 'TRUE', split: 'yes', full_info: ['true', 'false'] })).toEqual({
      dir: 'workflows',
      recurse: true,
      split: false,
      full_info: true,
    });
    expect(parsed(V1UserDataListQuerySchema, { dir: ['a', 'b'] })).toEqual({ dir: 'a' });
    expect(parsed(V1UserDataTreeQuerySchema, { path: ['x', 'y'] })).toEqual({ path: 'x' });
    expect(parsed(V1UserDataTreeQuerySchema, {})).toEqual({});
  });

  it('overwrites for anything but exactly "false"', () => {
    expect(parsed(V1UserDataWriteQuerySchema, { overwrite: 'false', full_info: 'True' })).toEqual({ overwrite: false, full_info: true });
    expect(parsed(V1UserDataWriteQuerySchema, { overwrite: 'False' })).toEqual({ overwrite: true });
    expect(parsed(V1UserDataWriteQuerySchema, {})).toEqual({});
  });

  it('refuses a listing without a folder with the engine\'s text', () => {
    for (const query of [{}, { dir: '' }, { dir: ['', 'x'] }]) expect(refusal(V1UserDataListQuerySchema, query)).toBe('Directory not provided');
  });
});

describe('v1 GET /api/view_metadata/{folder} query', () => {
  it('takes only a .safetensors file name', () => {
    expect(parsed(V1ViewMetadataQuerySchema, { filename: ['a.safetensors', 'b.ckpt'] })).toEqual({ filename: 'a.safetensors' });
    for (const query of [{}, { filename: 'a.ckpt' }, { filename: 'a.safetensors.txt' }]) expect(refusal(V1ViewMetadataQuerySchema, query)).toBe('The safetensors model was not found.');
  });
});

describe('v1 upload fields', () => {
  it('takes the engine\'s three folder types, an empty one as absent, and any overwrite text', () => {
    expect(parsed(V1UploadFieldsSchema, { type: 'temp', subfolder: 'a/b', overwrite: '1' })).toEqual({ type: 'temp', subfolder: 'a/b', overwrite: '1' });
    expect(parsed(V1UploadFieldsSchema, { type: '' })).toEqual({});
    expect(refusal(V1UploadFieldsSchema, { type: 'models' })).toBe('type must be input, output or temp.');
  });

  it('reads a mask\'s original_ref from its JSON, defaulting a subfolder or type that is not text', () => {
    const ref = (value: unknown) => ({ original_ref: JSON.stringify(value) });
    expect(parsed(V1MaskUploadFieldsSchema, ref({ filename: 'a.png', subfolder: 5 })).original_ref).toEqual({ filename: 'a.png', subfolder: '', type: 'input' });
    expect(parsed(V1MaskUploadFieldsSchema, { ...ref({ filename: 'a.png', subfolder: 's', type: 'output' }), type: 'temp' })).toEqual({
      type: 'temp',
      original_ref: { filename: 'a.png', subfolder: 's', type: 'output' },
    });
    const notJson = 'original_ref must be JSON {filename, subfolder, type} naming the original image.';
    const noName = 'original_ref must name the original image: {filename, subfolder, type}.';
    expect(refusal(V1MaskUploadFieldsSchema, {})).toBe(notJson);
    expect(refusal(V1MaskUploadFieldsSchema, { original_ref: '{nope' })).toBe(notJson);
    for (const value of [null, [], 'a.png', { filename: '' }, { filename: 3 }, {}]) expect(refusal(V1MaskUploadFieldsSchema, ref(value))).toBe(noName);
    expect(refusal(V1MaskUploadFieldsSchema, { ...ref({ filename: 'a.png' }), type: 'models' })).toBe('type must be input, output or temp.');
  });
});

describe('v1 PATCH /api/internal/logs/subscribe body', () => {
  it('needs a client id and an enabled, read for its truth', () => {
    expect(parsed(V1LogsSubscribeRequestSchema, { clientId: 'c', enabled: 1 })).toEqual({ clientId: 'c', enabled: true });
    expect(parsed(V1LogsSubscribeRequestSchema, { clientId: 'c', enabled: null })).toEqual({ clientId: 'c', enabled: false });
    for (const body of [{ clientId: 'c' }, { enabled: true }, { clientId: '', enabled: true }, { clientId: 'x'.repeat(129), enabled: true }, { clientId: 7, enabled: true }]) {
      expect(refusal(V1LogsSubscribeRequestSchema, body)).toBe('The body must be {"clientId": string, "enabled": boolean}');
    }
  });
});

describe('v2 POST /api/v2/assets fields', () => {
  it('reads the text fields as the JSON bodies read theirs', () => {
    const hex = 'AB'.repeat(32);
    expect(parsed(AssetUploadFieldsSchema, {})).toEqual({});
    expect(parsed(AssetUploadFieldsSchema, { expected_hash: hex, 'tags[]': ['a'], expires_in: '60', content_type: '', file_path: '' })).toEqual({
      expected_hash: hex,
      'tags[]': ['a'],
      expires_in: 60,
      content_type: '',
      file_path: '',
    });
    expect(parsed(AssetUploadFieldsSchema, { expires_in: '' })).toEqual({});
  });

  it('words each refusal', () => {
    expect(refusal(AssetUploadFieldsSchema, { expected_hash: 'junk' })).toBe('expected_hash must look like blake3:<64 hex digits>.');
    expect(refusal(AssetUploadFieldsSchema, { 'tags[]': Array.from({ length: 33 }, (_, i) => `t${i}`) })).toBe('At most 32 tags are allowed.');
    expect(refusal(AssetUploadFieldsSchema, { 'tags[]': [''] })).toBe('tags must be a list of strings of 1 to 128 characters.');
    expect(refusal(AssetUploadFieldsSchema, { expires_in: '5' })).toBe('expires_in must be a whole number of seconds from 60 to 604800.');
  });
});
