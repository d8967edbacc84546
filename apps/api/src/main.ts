import { ConfigError, loadConfig } from '#libs/config';
import { tuneRuntime } from '#libs/runtime';
import { createApi } from './app.js';

tuneRuntime();

try {
  const config = loadConfig();
  const app = await createApi(config);
  await app.listen({ port: config.api.port, host: config.api.host, backlog: config.http.listenBacklog });
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : config.api.port;
  console.log(JSON.stringify({ level: 30, msg: 'listening', role: 'api', host: config.api.host, port, surface: config.surface }));
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(78);
  }
  throw err;
}
