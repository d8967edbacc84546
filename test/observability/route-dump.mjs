// Test-only boot of the built api: collects every route Fastify registers, prints them as one
// JSON line and exits. Run by openapi.e2e.test.ts with a test stack's environment.
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const { loadConfig } = await import(`${ROOT}/dist/libs/config/index.js`);
const { createApi } = await import(`${ROOT}/dist/apps/api/src/app.js`);

const app = await createApi(loadConfig());
const fastify = app.getHttpAdapter().getInstance();
const routes = [];
fastify.addHook('onRoute', (route) => {
  for (const method of [route.method].flat()) routes.push({ method, url: route.url });
});
await app.init();
await fastify.ready();
process.stdout.write(`${JSON.stringify({ msg: 'routes', routes })}\n`);
await app.close();
process.exit(0);
