/** The engine's internal log routes (no /api twin on the engine). */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TERMINAL_SIZE } from '../logs.js';
import type { EngineState } from '../engine-state.js';
import { isPlainObject, readJsonBody, sendBadRequest, sendEmpty, sendJson } from '../http-util.js';

export function registerLogsRoutes(app: FastifyInstance, state: EngineState): void {
  app.get('/internal/logs', async (_req, reply) => sendJson(reply, state.logs.all().map((l) => `${l.t} - ${l.m}`).join('')));
  app.get('/internal/logs/raw', async (_req, reply) => sendJson(reply, { entries: state.logs.all(), size: TERMINAL_SIZE }));

  const subscribe = async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const read = readJsonBody(req.body, reply);
    if (read.answered) return read.answered;
    const json = read.json;
    if (!isPlainObject(json) || typeof json.clientId !== 'string' || !('enabled' in json)) {
      return sendBadRequest(reply, 'invalid_request', 'Body must be {"clientId": string, "enabled": boolean}');
    }
    if (json.enabled) state.logs.subscribe(json.clientId);
    else state.logs.unsubscribe(json.clientId);
    return sendEmpty(reply);
  };
  // The engine uses PATCH; POST is accepted too.
  app.patch('/internal/logs/subscribe', subscribe);
  app.post('/internal/logs/subscribe', subscribe);
}
