import { parsePreferWait } from './submit-body.js';

describe('parsePreferWait', () => {
  it('reads wait=N as RFC 7240 writes preferences: any case, spaces around =, a quoted value', () => {
    for (const header of ['wait=5', 'WAIT=5', 'Wait=5', 'wait = 5', 'wait="5"', 'respond-async, wait=5', 'handling=lenient; wait=5', ['return=minimal', 'wait=5']]) {
      expect(parsePreferWait(header, 60)).toBe(5);
    }
  });

  it('caps a long wait and ignores what is not a wait', () => {
    expect(parsePreferWait('wait=99999999999', 60)).toBe(60);
    for (const header of [undefined, '', 'wait=', 'wait=abc', 'wait="5', 'nowait=5', 'wait=-1', 'return=minimal']) {
      expect(parsePreferWait(header, 60)).toBeUndefined();
    }
  });
});
