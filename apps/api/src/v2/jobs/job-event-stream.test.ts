import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import type { StoredJobEvent } from '#libs/jobs';
import { JobEventStream } from './job-event-stream.js';

// A failure while a live stream is delivering (the database read behind an output's links, here)
// must end that stream, whose client then resumes with Last-Event-ID, and must not be left as an
// unhandled rejection: on Node 24 that stops the whole API process with every client on it.

const JOB_ID = '00000000-0000-4000-8000-000000000001';

describe('JobEventStream when a live event cannot be sent', () => {
  let app: FastifyInstance;
  let emit: (e: StoredJobEvent) => void;
  let slotClosed = false;

  beforeAll(async () => {
    const d = {
      jobs: { getOrThrow: async () => ({ id: JOB_ID, status: 'running', createdAt: new Date(), progress: null }) },
      config: { jobs: { sseKeepaliveMs: 60_000 } },
      events: { since: async () => [] },
      statusReads: { read: async () => ({ status: 'running', createdAt: new Date() }) },
      positions: { one: async () => null },
      fanout: {
        onJob: (_id: string, listener: (e: StoredJobEvent) => void) => {
          emit = listener;
          return () => undefined;
        },
      },
      views: {
        find: async () => ({}),
        outputEventView: async () => {
          throw new Error('database connection lost');
        },
      },
      limits: { openStream: async () => ({ refresh: async () => undefined, close: async () => void (slotClosed = true) }) },
      draining: { onDraining: () => () => undefined },
    } as unknown as Record<string, never>;
    const stream = new JobEventStream(d.jobs, d.config, d.events, d.statusReads, d.positions, d.fanout, d.views, d.limits, d.draining);
    app = Fastify({ logger: false });
    app.get('/events', (request, reply) => stream.stream({ id: 'account' } as never, { accountId: 'account', deploymentId: null }, JOB_ID, request, reply));
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    app.server.closeAllConnections();
    await app.close();
  });

  it('ends the stream, sends nothing after the failed event, and frees the stream slot', async () => {
    const port = (app.server.address() as AddressInfo).port;
    const text = await new Promise<string>((resolve, reject) => {
      http
        .get({ port, host: '127.0.0.1', path: '/events' }, (res) => {
          let body = '';
          let fired = false;
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            body += chunk;
            // Once the snapshot is out, the stream is live: an output whose view fails, then more.
            if (!fired && body.includes('event: status')) {
              fired = true;
              emit({ id: '5-0', event: 'output', data: JSON.stringify({ id: 'asset-1', name: 'a.png' }) });
              emit({ id: '6-0', event: 'progress', data: JSON.stringify({ percent: 50 }) });
            }
          });
          res.on('end', () => resolve(body));
          res.on('error', reject);
        })
        .on('error', reject);
    });
    expect(text).toContain('event: status');
    expect(text).not.toContain('event: output');
    expect(text).not.toContain('id: 6-0');
    expect(slotClosed).toBe(true);
  });
});
