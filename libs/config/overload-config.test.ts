import { loadConfig } from './index.js';

// Refusals of bad values are listed with every other variable's in test/config/config.test.ts.
describe('load shedding and readiness settings', () => {
  it('defaults to thresholds measured on 2 cores, utilization off', () => {
    expect(loadConfig({}).overload).toEqual({
      maxEventLoopDelayMs: 200,
      maxEventLoopUtilization: 0,
      maxHeapUsedFraction: 0.9,
      sampleIntervalMs: 1000,
      maxRequestsInFlight: 1024,
      maxAcceptQueue: 128,
      retryAfterSeconds: 2,
    });
    expect(loadConfig({}).http.listenBacklog).toBe(4096);
    expect(loadConfig({}).readiness).toEqual({ storageProbeIntervalMs: 5000 });
  });

  it.each(['0.95', '.5', '1', '0', '1.0'])('takes the fraction %s', (value) => {
    expect(loadConfig({ OVERLOAD_MAX_EVENT_LOOP_UTILIZATION: value }).overload.maxEventLoopUtilization).toBe(Number(value));
  });
});
