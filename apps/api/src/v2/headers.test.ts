import { ApiError, ByteRangeSchema, IdempotencyKeySchema, LastEventIdSchema, PreferWaitSchema } from '#libs/contracts';
import { resolveRange } from '../http/send-blob.js';
import { parseV2Input } from './parse-input.js';

// The request headers as the handlers parse them, with their operations' declared schemas
// (Cancel-After has its own test beside the submission).

function refusal(parse: () => unknown): { code: string; message: string; details?: unknown } {
  try {
    parse();
  } catch (err) {
    const e = err as ApiError;
    return { code: e.code, message: e.message, ...(e.details !== undefined ? { details: e.details } : {}) };
  }
  throw new Error('accepted');
}

describe('Idempotency-Key (v2 submissions, uploads, imports)', () => {
  it('takes 1 to 255 visible ASCII characters, the first of a repeated header, and nothing when absent', () => {
    expect(parseV2Input(IdempotencyKeySchema, undefined)).toBeUndefined();
    expect(parseV2Input(IdempotencyKeySchema, 'k-1')).toBe('k-1');
    expect(parseV2Input(IdempotencyKeySchema, 'x'.repeat(255))).toBe('x'.repeat(255));
    expect(parseV2Input(IdempotencyKeySchema, ['first', 'second'])).toBe('first');
  });

  it.each(['', 'with space', 'x'.repeat(256), 'caf\u00e9', [], 5])('refuses %j with invalid_request and no details', (header) => {
    expect(refusal(() => parseV2Input(IdempotencyKeySchema, header))).toEqual({ code: 'invalid_request', message: 'Idempotency-Key must be 1 to 255 visible ASCII characters.' });
  });
});

describe('Prefer (v2 submissions)', () => {
  it('reads wait=N as RFC 7240 writes preferences: any case, spaces around =, a quoted value', () => {
    for (const header of ['wait=5', 'WAIT=5', 'Wait=5', 'wait = 5', 'wait="5"', 'respond-async, wait=5', 'handling=lenient; wait=5', ['return=minimal', 'wait=5']]) {
      expect(parseV2Input(PreferWaitSchema, header)).toBe(5);
    }
  });

  it('reads a long wait whole (the handler caps it) and ignores, never refuses, what is not a wait', () => {
    expect(parseV2Input(PreferWaitSchema, 'wait=99999999999')).toBe(99999999999);
    expect(parseV2Input(PreferWaitSchema, `wait=${'9'.repeat(100)}`)).toBeGreaterThan(1e99 - 1);
    for (const header of [undefined, '', 'wait=', 'wait=abc', 'wait="5', 'nowait=5', 'wait=-1', 'return=minimal', `wait=${'9'.repeat(101)}`]) {
      expect(parseV2Input(PreferWaitSchema, header)).toBeUndefined();
    }
  });
});

describe('Last-Event-ID (v2 event streams)', () => {
  it('reads an event id, trimmed; anything else is no id, never a refusal', () => {
    expect(parseV2Input(LastEventIdSchema, '1700000000000-1048576')).toBe('1700000000000-1048576');
    expect(parseV2Input(LastEventIdSchema, ' 5-0 ')).toBe('5-0');
    for (const header of [undefined, '', 'abc', '5', '5-0-0', '-5-0', `${'9'.repeat(21)}-0`, ['5-0'], ['5-0', '6-0']]) {
      expect(parseV2Input(LastEventIdSchema, header)).toBeUndefined();
    }
  });
});

describe('Range (downloads)', () => {
  const range = (header: unknown, size = 100) => resolveRange(parseV2Input(ByteRangeSchema, header), size);

  it('reads one byte range, resolved against the size', () => {
    expect(range('bytes=0-9')).toEqual({ start: 0, end: 9 });
    expect(range(' bytes=90- ')).toEqual({ start: 90, end: 99 });
    expect(range('bytes=-10')).toEqual({ start: 90, end: 99 });
    expect(range('bytes=-1000')).toEqual({ start: 0, end: 99 });
    expect(range('bytes=50-1000')).toEqual({ start: 50, end: 99 });
    expect(range('bytes=100-')).toBe('unsatisfiable');
    expect(range('bytes=-0')).toBe('unsatisfiable');
    expect(range('bytes=9-5')).toBe('unsatisfiable');
  });

  it('ignores, never refuses, what is not one byte range', () => {
    for (const header of [undefined, '', 'bytes=-', 'bytes=0-1,5-6', 'items=0-1', 'bytes=a-b', ['bytes=0-1']]) expect(range(header)).toBeNull();
  });
});
