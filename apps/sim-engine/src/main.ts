/** Entry point: `node dist/apps/sim-engine/src/main.js`; configuration from SIM_* variables. */
import { createLogger } from '#libs/logging';
import { tuneRuntime } from '#libs/runtime';
import { startSimEngine } from './server.js';

// The services' flags also when started as a plain `node dist/...`: outputs stream out in pieces,
// which the flags let scavenges free (libs/runtime).
tuneRuntime();

async function main(): Promise<void> {
  const engine = await startSimEngine();
  // A JSON line tests and scripts can wait for (the port matters when SIM_ENGINE_PORT=0).
  createLogger({ base: { role: 'sim-engine' }, level: 'info' }).info({ port: engine.port, url: engine.url }, 'listening');
  const shutdown = (): void => {
    void engine.close().then(() => process.exit(0));
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

main().catch((err: unknown) => {
  process.stderr.write(`sim-engine failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
