import { ConfigError, loadConfig } from '#libs/config';
import { tuneRuntime } from '#libs/runtime';
import { WebhooksProcess } from './webhooks-process.js';

tuneRuntime();

try {
  const webhooks = new WebhooksProcess(loadConfig());
  const stop = () => void webhooks.stop().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await webhooks.start();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(78);
  }
  throw err;
}
