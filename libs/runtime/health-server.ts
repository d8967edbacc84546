import { createServer, type Server } from 'node:http';
import type { ProcessMetrics } from '#libs/metrics';

export type Probe = () => Promise<Record<string, string>>;

/** /healthz (alive) and /readyz (what `ready` checks: its dependencies) for orchestrators; /metrics for Prometheus. The worker's and the webhooks process's. */
export function startHealthServer(host: string, port: number, ready: Probe, metrics?: ProcessMetrics): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify(body));
    };
    if (req.url === '/healthz') return send(200, { status: 'ok' });
    if (req.url === '/readyz') {
      void ready().then(
        (checks) => {
          const ok = Object.values(checks).every((v) => v === 'ok');
          send(ok ? 200 : 503, { status: ok ? 'ready' : 'not_ready', checks });
        },
        () => send(503, { status: 'not_ready' }),
      );
      return;
    }
    if (req.url === '/metrics' && metrics) {
      void metrics.render().then(
        (text) => {
          res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
          res.end(text);
        },
        () => send(500, { error: { code: 'upstream_error', message: 'Metrics are unavailable.' } }),
      );
      return;
    }
    send(404, { error: { code: 'not_found', message: 'Not found.' } });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const address = server.address();
      resolve({ server, port: typeof address === 'object' && address ? address.port : port });
    });
  });
}
