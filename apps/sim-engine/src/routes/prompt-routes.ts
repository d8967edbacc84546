/** Prompt submission, queue, interrupt and history routes. */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ApiPrompt, QueueItem } from '#libs/engine-protocol';
import { queueInfo, type EngineState } from '../engine-state.js';
import { isPlainObject, parseJsonBody, readJsonBody, sendBadRequest, sendEmpty, sendJson } from '../http-util.js';

export function registerPromptRoutes(app: FastifyInstance, state: EngineState): void {
  app.get('/prompt', async (_req, reply) => sendJson(reply, queueInfo(state)));

  app.post('/prompt', async (req, reply) => {
    state.logs.log('got prompt');
    const read = readJsonBody(req.body, reply);
    if (read.answered) return read.answered;
    const json = read.json;
    if (!isPlainObject(json)) return sendBadRequest(reply, 'invalid_json', 'Request body must be a JSON object', typeof json);

    let number: number;
    if ('number' in json) {
      number = Number(json.number);
      if (!Number.isFinite(number)) return sendBadRequest(reply, 'invalid_number', 'number must be numeric', String(json.number));
    } else {
      number = state.nextNumber;
      if (json.front) number = -number;
      state.nextNumber += 1;
    }

    if (!('prompt' in json)) {
      return sendJson(reply, { error: { type: 'no_prompt', message: 'No prompt provided', details: 'No prompt provided', extra_info: {} }, node_errors: {} }, 400);
    }
    const promptId = json.prompt_id === undefined || json.prompt_id === null ? randomUUID() : String(json.prompt_id);
    const valid = state.validator.validate(json.prompt, json.partial_execution_targets);
    const extraData: Record<string, unknown> = isPlainObject(json.extra_data) ? json.extra_data : {};
    if ('client_id' in json) extraData.client_id = json.client_id;
    if (!valid.ok) {
      state.logs.log(`invalid prompt: ${JSON.stringify(valid.error)}`);
      return sendJson(reply, { error: valid.error, node_errors: valid.nodeErrors }, 400);
    }
    const item: QueueItem = [number, promptId, json.prompt as ApiPrompt, extraData, valid.outputs];
    state.queue.put(item);
    return sendJson(reply, { prompt_id: promptId, number, node_errors: valid.nodeErrors });
  });

  app.get('/queue', async (_req, reply) => {
    const { running, pending } = state.queue.current();
    return sendJson(reply, { queue_running: running, queue_pending: pending });
  });

  app.post('/queue', async (req, reply) => {
    const read = readJsonBody(req.body, reply);
    if (read.answered) return read.answered;
    const json = read.json;
    if (!isPlainObject(json)) return sendBadRequest(reply, 'invalid_json', 'Request body must be a JSON object', typeof json);
    if (json.clear) state.queue.wipe();
    if (Array.isArray(json.delete)) for (const id of json.delete) state.queue.delete(String(id));
    return sendEmpty(reply);
  });

  app.post('/interrupt', async (req, reply) => {
    let json: unknown = {};
    try {
      json = parseJsonBody(req.body);
    } catch {
      json = {}; // the engine treats an unreadable body as a global interrupt
    }
    const promptId = isPlainObject(json) ? json.prompt_id : undefined;
    if (promptId) {
      if (state.queue.runningItems().some((item) => item[1] === promptId)) {
        state.logs.log(`Interrupting prompt ${String(promptId)}`);
        state.executor.interrupt();
      } else {
        state.logs.log(`Prompt ${String(promptId)} is not currently running, skipping interrupt`);
      }
    } else {
      state.logs.log('Global interrupt (no prompt_id specified)');
      state.executor.interrupt();
    }
    return sendEmpty(reply);
  });

  app.get<{ Querystring: { max_items?: string; offset?: string } }>('/history', async (req, reply) => {
    const parse = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number.parseInt(v, 10));
    const maxItems = parse(req.query.max_items);
    const offset = parse(req.query.offset);
    if ((maxItems !== undefined && Number.isNaN(maxItems)) || (offset !== undefined && Number.isNaN(offset))) {
      return sendBadRequest(reply, 'invalid_query', 'max_items and offset must be integers');
    }
    return sendJson(reply, state.queue.getHistory({ maxItems, offset }));
  });

  app.get<{ Params: { promptId: string } }>('/history/:promptId', async (req, reply) => sendJson(reply, state.queue.getHistory({ promptId: req.params.promptId })));

  app.post('/history', async (req, reply) => {
    const read = readJsonBody(req.body, reply);
    if (read.answered) return read.answered;
    const json = read.json;
    if (!isPlainObject(json)) return sendBadRequest(reply, 'invalid_json', 'Request body must be a JSON object', typeof json);
    if (json.clear) state.queue.wipeHistory();
    if (Array.isArray(json.delete)) for (const id of json.delete) state.queue.deleteHistory(String(id));
    return sendEmpty(reply);
  });
}
