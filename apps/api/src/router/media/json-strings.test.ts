import { mayHoldUrl, stringsAt } from './json-strings.js';

describe('mayHoldUrl', () => {
  it('finds URLs as written and with escaped slashes or unicode escapes, which stringsAt decodes', () => {
    const plain = '{"data":[{"url":"https://cdn.example/a.png"}]}';
    const slashes = '{"data":[{"url":"https:\\/\\/cdn.example\\/a.png"}]}';
    const unicode = '{"data":[{"url":"https:\\u002f\\u002fcdn.example/a.png"}]}';
    for (const text of [plain, slashes, unicode]) {
      expect(mayHoldUrl(text)).toBe(true);
      expect(stringsAt(text, [['data', '*', 'url']]).map((s) => s.value)).toEqual(['https://cdn.example/a.png']);
    }
  });

  it('rules out an answer with its media inline', () => {
    expect(mayHoldUrl('{"created":1,"data":[{"b64_json":"iVBORw0KGgo+/="}],"usage":{"total_tokens":3}}')).toBe(false);
  });
});
