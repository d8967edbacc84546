import { ConfigError, loadConfig } from './index.js';

describe('load shedding and readiness settings', () => {
  it('defaults to thresholds measured on 2 cores, utilization off', () => {
    expect(loadConfig({}).overload).toEqual({
      maxEventLoopDelayMs: 200,
      maxEventLoopUtilization: 0,
      maxHeapUsedFraction: 0.9,
      sampleIntervalMs: 1000,
      maxRequestsInFlight: 256,
      maxAcceptQueue: 128,
      retryAfterSeconds: 2,
    });
    expect(loadConfig({}).http.listenBacklog).toBe(4096);
    expect(loadConfig({}).readiness).toEqual({ storageProbeIntervalMs: 5000 });
  });

  it.each(['0.95', '.5', '1', '0', '1.0'])('takes the fraction %s', (value) => {
    expect(loadConfig({ OVERLOAD_MAX_EVENT_LOOP_UTILIZATION: value }).overload.maxEventLoopUtilization).toBe(Number(value));
  });

  it.each([
    ['OVERLOAD_MAX_EVENT_LOOP_UTILIZATION', '1.5'],
    ['OVERLOAD_MAX_HEAP_USED_FRACTION', '90%'],
    ['OVERLOAD_MAX_EVENT_LOOP_DELAY_MS', '-1'],
    ['OVERLOAD_SAMPLE_INTERVAL_MS', '0'],
    ['OVERLOAD_RETRY_AFTER_SECONDS', '0'],
    ['OVERLOAD_MAX_ACCEPT_QUEUE', 'many'],
    ['HTTP_LISTEN_BACKLOG', '0'],
    ['STORAGE_WRITE_PROBE_INTERVAL_MS', '1.5'],
  ])('stops on a bad %s and names it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`${name}:`));
  });
});
