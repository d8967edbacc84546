/** Entry point: `node dist/apps/partner-sim/src/main.js`; PARTNER_SIM_HOST, PARTNER_SIM_PORT, PARTNER_SIM_TIME_SCALE. */
import { createLogger } from '#libs/logging';
import { tuneRuntime } from '#libs/runtime';
import { startPartnerSim } from './server.js';

// Result media stream out in pieces: without the services' flags each file served was freed by a
// full collection, pausing the simulator mid-transfer (docs/performance.md).
tuneRuntime();

function number(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a number from 0 (got "${value}")`);
  return n;
}

async function main(): Promise<void> {
  const env = process.env;
  const host = env.PARTNER_SIM_HOST || '127.0.0.1';
  const sim = await startPartnerSim({
    host,
    port: number(env.PARTNER_SIM_PORT, 8190, 'PARTNER_SIM_PORT'),
    timeScale: number(env.PARTNER_SIM_TIME_SCALE, 1, 'PARTNER_SIM_TIME_SCALE'),
  });
  // A JSON line scripts can wait for (the port matters with PARTNER_SIM_PORT=0).
  createLogger({ base: { role: 'partner-sim' }, level: 'info' }).info({ port: sim.port, url: sim.url }, 'listening');
  const shutdown = (): void => {
    void sim.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

main().catch((err: unknown) => {
  process.stderr.write(`partner-sim failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
