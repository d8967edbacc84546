import { ConfigError, loadConfig } from '#libs/config';
import { createLogger } from '#libs/logging';
import { tuneRuntime } from '#libs/runtime';
import { createApi } from './app.js';

tuneRuntime();

try {
  const config = loadConfig();
  const app = await createApi(config);
  await app.listen({ port: config.api.port, host: config.api.host, backlog: config.http.listenBacklog });
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : config.api.port;
  // At any LOG_LEVEL: supervisors and tests wait for this line.
  createLogger({ base: { role: 'api' }, level: config.logLevel, keepLifecycle: true }).info({ host: config.api.host, port, surface: config.surface }, 'listening');
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(78);
  }
  throw err;
}
