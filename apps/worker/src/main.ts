import { ConfigError, loadConfig } from '#libs/config';
import { tuneRuntime } from '#libs/runtime';
import { WorkerProcess } from './worker-process.js';

tuneRuntime();

try {
  const worker = new WorkerProcess(loadConfig());
  const stop = () => void worker.stop().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await worker.start();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(78);
  }
  throw err;
}
