import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Config } from '#libs/config';
import { mountConsole } from '../console/serve-console.js';
import { mountApiDocs } from '../docs/index.js';
import { mountQueueDashboard } from './queue-dashboard.js';

/**
 * The pages people open in a browser, served from static assets on the api's Fastify instance:
 * `/docs` + `/openapi.json` (the API reference), `/console/` (the tenants' console) and
 * `/admin/queues` (the operators' queue dashboard).
 * Call after the global prefix is set and before the app listens.
 */
export async function mountBrowserPages(app: NestFastifyApplication, config: Config): Promise<void> {
  mountApiDocs(app, config);
  mountConsole(app, config);
  await mountQueueDashboard(app, config);
}
