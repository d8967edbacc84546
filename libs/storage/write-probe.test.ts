import { jest } from '@jest/globals';
import { StorageWriteProbe } from './write-probe.js';

/** A store whose write probe takes `ms` and fails while `failing` is set; counts its probes. */
function fakeStore(ms = 0) {
  const store = {
    probes: 0,
    failing: null as Error | null,
    async probeWrite(): Promise<void> {
      store.probes++;
      await new Promise((r) => setTimeout(r, ms));
      if (store.failing) throw store.failing;
    },
  };
  return store;
}

const outcome = (p: Promise<void>) => p.then(() => 'ok', (err: Error) => `error: ${err.message}`);

// The clock is jest's: intervals are counted exactly, however busy the machine is.
const sleep = (ms: number) => jest.advanceTimersByTimeAsync(ms);
/** A check's outcome once the fake store's own delay has passed. */
async function checked(probe: StorageWriteProbe, storeMs = 0): Promise<string> {
  const result = outcome(probe.check());
  await sleep(storeMs);
  return result;
}

describe('StorageWriteProbe', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('writes at most once per interval, however many checks come, and shares a probe in flight', async () => {
    const store = fakeStore(20);
    const probe = new StorageWriteProbe(store, 100);
    const all = Promise.all(Array.from({ length: 50 }, () => outcome(probe.check())));
    await sleep(20);
    expect(await all).toEqual(Array(50).fill('ok'));
    expect(await checked(probe)).toBe('ok');
    expect(store.probes).toBe(1);
    await sleep(120);
    expect(await checked(probe, 20)).toBe('ok');
    expect(store.probes).toBe(2);
  });

  it('names the failure, and sees the store recover after the interval', async () => {
    const store = fakeStore();
    const probe = new StorageWriteProbe(store, 50);
    store.failing = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    expect(await checked(probe)).toBe('error: ENOSPC: no space left on device, write');
    store.failing = null;
    // Within the interval the last result stands.
    expect(await checked(probe)).toMatch(/^error: ENOSPC/);
    await sleep(70);
    expect(await checked(probe)).toBe('ok');
  });

  it('puts the HTTP status of an S3 failure in the reason', async () => {
    const store = fakeStore();
    store.failing = Object.assign(new Error('UnknownError'), { $metadata: { httpStatusCode: 503 } });
    expect(await checked(new StorageWriteProbe(store, 0))).toBe('error: UnknownError (HTTP 503)');
  });
});
