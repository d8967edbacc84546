/** startSimEngine(): a ComfyUI-compatible engine over Fastify, for tests and development. */
import { readFileSync } from 'node:fs';
import Fastify, { type FastifyInstance } from 'fastify';
import multipart from '@fastify/multipart';
import websocket from '@fastify/websocket';
import type { ObjectInfo } from '#libs/engine-protocol';
import { resolveConfig, type SimConfig } from './config.js';
import type { EngineState } from './engine-state.js';
import { PromptExecutor } from './executor.js';
import { EngineLogs } from './logs.js';
import { NodeRegistry } from './nodes/registry.js';
import { PromptQueue } from './queue.js';
import { registerFileRoutes } from './routes/file-routes.js';
import { registerInfoRoutes } from './routes/info-routes.js';
import { registerLogsRoutes } from './routes/logs-routes.js';
import { registerPromptRoutes } from './routes/prompt-routes.js';
import { registerWsRoute } from './routes/ws-route.js';
import { ModelFolders } from './models.js';
import { Storage } from './storage.js';
import { PromptValidator } from './validation.js';
import { WsHub } from './ws-hub.js';
import { queueInfo } from './engine-state.js';

export type SimEngineOptions = Partial<SimConfig>;

export interface SimEngine {
  port: number;
  /** e.g. http://127.0.0.1:8188 */
  url: string;
  config: SimConfig;
  close(): Promise<void>;
}

function createState(config: SimConfig): EngineState {
  const storage = new Storage(config.inputDir, config.outputDir, config.tempDir, new ModelFolders(config.modelsDir, config.checkpoints));
  const hub = new WsHub();
  const logs = new EngineLogs(hub, config.logToStderr);
  const recorded = config.objectInfoFile ? (JSON.parse(readFileSync(config.objectInfoFile, 'utf8')) as ObjectInfo) : {};
  const registry = new NodeRegistry(() => {
    const lists = new Map<string, string[]>();
    const models = (folder: string): string[] => {
      let names = lists.get(folder);
      if (!names) lists.set(folder, (names = storage.models.list(folder)));
      return names;
    };
    return { inputImages: storage.listInputImages(), inputAudio: storage.listInputAudio(), models };
  }, recorded);
  const state = {} as EngineState;
  // The engine broadcasts `status` on every queue change.
  const queue = new PromptQueue(() => hub.sendJson('status', { status: queueInfo(state) }, null));
  Object.assign(state, {
    config,
    storage,
    registry,
    validator: new PromptValidator(registry, storage),
    queue,
    executor: new PromptExecutor(queue, registry, hub, logs, storage, config),
    hub,
    logs,
    nextNumber: 0,
  } satisfies EngineState);
  return state;
}

async function buildApp(state: EngineState): Promise<FastifyInstance> {
  const app = Fastify({ logger: false, bodyLimit: 256 * 1024 * 1024, forceCloseConnections: true });
  // The engine reads bodies with request.json() whatever the content type; we parse in the
  // routes so that invalid JSON gets our clear 400 instead of a framework error.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  await app.register(multipart);
  await app.register(websocket);
  const routes = async (scope: FastifyInstance): Promise<void> => {
    registerInfoRoutes(scope, state);
    registerPromptRoutes(scope, state);
    registerFileRoutes(scope, state);
    registerWsRoute(scope, state);
  };
  // Every route answers with and without the /api prefix, as on the engine.
  await app.register(routes);
  await app.register(routes, { prefix: '/api' });
  registerLogsRoutes(app, state);
  return app;
}

export async function startSimEngine(options: SimEngineOptions = {}): Promise<SimEngine> {
  const config = resolveConfig(options);
  if (config.startupDelayMs > 0) await new Promise((r) => setTimeout(r, config.startupDelayMs));
  const state = createState(config);
  const app = await buildApp(state);
  await app.listen({ host: config.host, port: config.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  state.executor.start();
  state.logs.log(`Starting server\n\nTo see the GUI go to: http://${config.host}:${port}`);
  let closed = false;
  return {
    port,
    url: `http://${config.host}:${port}`,
    config,
    async close() {
      if (closed) return;
      closed = true;
      await state.executor.stop();
      state.hub.closeAll();
      await app.close();
    },
  };
}
