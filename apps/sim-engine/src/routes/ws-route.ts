/** GET /ws?clientId=: sid handshake, feature_flags exchange, and the socket's lifetime. */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type {} from '@fastify/websocket';
import { queueInfo, serverFeatures, type EngineState } from '../engine-state.js';
import { isPlainObject } from '../http-util.js';

export function registerWsRoute(app: FastifyInstance, state: EngineState): void {
  app.get<{ Querystring: { clientId?: string } }>('/ws', { websocket: true }, (socket, req) => {
    const sid = req.query.clientId || randomUUID().replace(/-/g, '');
    state.hub.add(sid, socket);
    let firstMessage = true;
    socket.on('message', (data, isBinary) => {
      if (isBinary) return;
      let msg: unknown;
      try {
        msg = JSON.parse(Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8'));
      } catch {
        state.logs.log(`Invalid JSON received from client ${sid}`);
        return;
      }
      // Only the very first message may declare feature flags, as on the engine.
      if (firstMessage && isPlainObject(msg) && msg.type === 'feature_flags') {
        state.hub.setFlags(sid, isPlainObject(msg.data) ? msg.data : {});
        state.hub.sendJson('feature_flags', serverFeatures(state), sid);
      }
      firstMessage = false;
    });
    socket.on('close', () => state.hub.remove(sid, socket));
    state.hub.sendJson('status', { status: queueInfo(state), sid }, sid);
    // A reconnecting client that owns the running prompt learns the current node.
    if (state.executor.clientId === sid && state.executor.lastNodeId !== null) {
      state.hub.sendJson('executing', { node: state.executor.lastNodeId }, sid);
    }
  });
}
