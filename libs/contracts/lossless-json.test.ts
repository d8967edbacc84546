import { describe, expect, test } from '@jest/globals';
import { copyJson, isRawJson, parseLosslessJson, rawInteger } from './lossless-json.js';

describe('lossless JSON', () => {
  const text = '{"seed": 18446744073709551615, "small": 42, "neg": -9007199254740993, "f": 0.5, "s": "12345678901234567890"}';

  test('integers beyond 2^53 keep every digit through parse and stringify', () => {
    const value = parseLosslessJson(text) as Record<string, unknown>;
    expect(isRawJson(value.seed)).toBe(true);
    expect(rawInteger(value.seed)).toBe(18446744073709551615n);
    expect(rawInteger(value.neg)).toBe(-9007199254740993n);
    expect(value.small).toBe(42);
    expect(value.f).toBe(0.5);
    expect(value.s).toBe('12345678901234567890');
    expect(JSON.stringify(value)).toBe('{"seed":18446744073709551615,"small":42,"neg":-9007199254740993,"f":0.5,"s":"12345678901234567890"}');
  });

  test('copies keep raw integers raw', () => {
    const value = parseLosslessJson('[{"a": [99999999999999999999]}]');
    const copy = copyJson(value);
    expect(copy).not.toBe(value);
    expect(JSON.stringify(copy)).toBe('[{"a":[99999999999999999999]}]');
  });

  test('a text without long digit runs parses as JSON.parse does', () => {
    expect(parseLosslessJson('{"a": 1e300, "b": [1, 2.5]}')).toEqual({ a: 1e300, b: [1, 2.5] });
  });
});
