/** Read-only discovery routes: object_info, system_stats, features, embeddings, extensions, models. */
import os from 'node:os';
import type { FastifyInstance } from 'fastify';
import { ENGINE_VERSION, serverFeatures, type EngineState } from '../engine-state.js';
import { sendEmpty, sendJson } from '../http-util.js';
import { MODEL_FOLDERS } from '../models.js';


export function registerInfoRoutes(app: FastifyInstance, state: EngineState): void {
  app.get('/object_info', async (_req, reply) => sendJson(reply, state.registry.objectInfo()));

  app.get<{ Params: { nodeClass: string } }>('/object_info/:nodeClass', async (req, reply) => {
    const def = state.registry.definition(req.params.nodeClass);
    return sendJson(reply, def ? { [req.params.nodeClass]: def } : {});
  });

  app.get('/system_stats', async (_req, reply) => {
    const total = os.totalmem();
    const free = os.freemem();
    return sendJson(reply, {
      system: {
        os: 'posix',
        ram_total: total,
        ram_free: free,
        comfyui_version: ENGINE_VERSION,
        required_frontend_version: '1.27.10',
        installed_templates_version: null,
        required_templates_version: '0.1.95',
        python_version: `sim-engine (node ${process.version})`,
        pytorch_version: 'sim',
        embedded_python: false,
        argv: ['sim-engine', '--cpu', '--listen', state.config.host],
      },
      devices: [{ name: 'cpu', type: 'cpu', index: null, vram_total: total, vram_free: free, torch_vram_total: total, torch_vram_free: free }],
    });
  });

  app.get('/features', async (_req, reply) => sendJson(reply, serverFeatures(state)));
  // Names without their extension, as the engine's route lists them.
  app.get('/embeddings', async (_req, reply) => sendJson(reply, state.storage.models.list('embeddings').map((n) => n.replace(/\.[^./]*$/, ''))));
  app.get('/extensions', async (_req, reply) => sendJson(reply, []));
  app.get('/models', async (_req, reply) => sendJson(reply, MODEL_FOLDERS));
  app.get<{ Params: { folder: string } }>('/models/:folder', async (req, reply) => {
    if (!MODEL_FOLDERS.includes(req.params.folder)) return sendEmpty(reply, 404);
    return sendJson(reply, state.storage.models.list(req.params.folder));
  });
}
