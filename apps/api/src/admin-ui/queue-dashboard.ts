import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance } from 'fastify';
import type { Queue } from 'bullmq';
import type { Config } from '#libs/config';
import type { RunPayload } from '#libs/jobs';
import { AuthFailures } from '../auth/index.js';
import { RUN_QUEUE } from '../jobs/job-system.providers.js';
import { operatorGate } from './operator-gate.js';

export function queueDashboardPath(config: Config): string {
  return `${config.api.basePath}/admin/queues`;
}

/**
 * bull-board over the run queue, at `<BASE_PATH>/admin/queues`, for operators only. Mounted with
 * bull-board's Fastify adapter on the api's own Fastify instance (its Nest middleware does not run
 * under Fastify). Without OPERATOR_TOKEN nothing is mounted, so the path is a plain 404.
 *
 * Read-only: PostgreSQL is the source of truth for jobs and the fair dispatcher decides what enters
 * this queue; retrying or removing runs by hand here would go around both. Cancel jobs through the
 * API or the admin command line instead.
 */
export async function mountQueueDashboard(app: NestFastifyApplication, config: Config): Promise<void> {
  if (!config.operatorToken) return;
  const prefix = queueDashboardPath(config);
  const queue = app.get<Queue<RunPayload>>(RUN_QUEUE);
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(prefix);
  createBullBoard({
    queues: [new BullMQAdapter(queue, { readOnlyMode: true, description: 'Runs handed to workers by the fair dispatcher' })],
    serverAdapter,
    options: { uiConfig: { boardTitle: 'comfy-cloud queues' } },
  });
  const plugin = serverAdapter.registerPlugin();
  await app.register(
    async (scope: FastifyInstance) => {
      // In this plugin's scope only: every dashboard route, page, asset and API call is gated.
      scope.addHook('onRequest', operatorGate(config, prefix, app.get(AuthFailures)));
      await scope.register(plugin);
    },
    { prefix },
  );
}
