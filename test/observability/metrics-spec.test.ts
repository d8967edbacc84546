import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadConfig } from '#libs/config';
import {
  JOB_STATUSES,
  ProcessMetrics,
  ROLE_METRICS,
  addInflightSpend,
  metricSpecs,
  routerCallObserved,
  setInflightSpend,
  setJobCounts,
  setOldestPendingWebhook,
  webhookAttemptObserved,
  webhookDeliveryEnded,
} from '#libs/metrics';
import { fastifyOptions, jobIdOfUrl } from '../../apps/api/src/http/fastify-setup.js';

interface SpecEntry {
  name: string;
  type: string;
  labels: string[];
  help: string;
}

const FIXED: SpecEntry[] = JSON.parse(readFileSync('ops/metrics.json', 'utf8'));

describe('metrics definitions', () => {
  it('are exactly the metrics of ops/metrics.json: names, types, labels and help', async () => {
    const byName = (list: SpecEntry[]) => [...list].sort((a, b) => a.name.localeCompare(b.name));
    expect(byName(await metricSpecs())).toEqual(byName(FIXED));
  });

  it('are split between the api, the worker and the webhooks process with nothing exported twice or left out', () => {
    const names = Object.values(ROLE_METRICS).map((metrics) => metrics.map((m) => (m as unknown as { name: string }).name));
    const all = names.flat();
    expect(new Set(all).size).toBe(all.length);
    expect([...all].sort()).toEqual(FIXED.map((m) => m.name).sort());
  });

  it('render the webhook helpers into the webhooks process exposition only', async () => {
    const metrics = new ProcessMetrics('webhooks', 0);
    webhookAttemptObserved('http_error');
    webhookAttemptObserved('delivered');
    webhookDeliveryEnded('succeeded');
    setOldestPendingWebhook(42);
    const text = await metrics.render();
    expect(text).toContain('webhook_delivery_attempts_total{result="http_error"} 1');
    expect(text).toContain('webhook_deliveries_total{outcome="succeeded"} 1');
    expect(text).toContain('webhook_oldest_pending_seconds 42');
    expect(await new ProcessMetrics('api', 0).render()).not.toContain('webhook_');
  });

  it('render the router helpers into the api exposition, and jobs_total for every status', async () => {
    const metrics = new ProcessMetrics('api', 0);
    routerCallObserved('acme/echo', 'success', 0.2);
    routerCallObserved('acme/echo', 'provider_timeout', 3);
    setInflightSpend(120);
    addInflightSpend(-20);
    setJobCounts({ running: 2 });
    const text = await metrics.render();
    expect(text).toContain('router_calls_total{model="acme/echo",bucket="success"} 1');
    expect(text).toContain('router_calls_total{model="acme/echo",bucket="provider_timeout"} 1');
    expect(text).toContain('router_call_duration_seconds_count{model="acme/echo"} 2');
    expect(text).toContain('router_inflight_spend_cents 100');
    for (const status of JOB_STATUSES) expect(text).toContain(`jobs_total{status="${status}"} ${status === 'running' ? 2 : 0}`);
    // The worker's families are not part of the api's scrape.
    expect(text).not.toContain('engine_ready');
  });

  it('keep the last values when a collector fails instead of failing the scrape', async () => {
    const metrics = new ProcessMetrics('api', 0);
    let calls = 0;
    metrics.addCollector(async () => {
      calls++;
      throw new Error('database away');
    });
    const text = await metrics.render();
    expect(calls).toBe(1);
    expect(text).toContain('# TYPE queue_depth gauge');
  });
});

describe('api request logs', () => {
  const JOB = '3f2a1c9e-8b7d-4e6f-9a0b-1c2d3e4f5a6b';

  it('find the job a URL is about', () => {
    expect(jobIdOfUrl(`/api/v2/jobs/${JOB}`)).toBe(JOB);
    expect(jobIdOfUrl(`/gw/api/v2/jobs/${JOB.toUpperCase()}/events?x=1`)).toBe(JOB);
    expect(jobIdOfUrl(`/api/job/${JOB}/status`)).toBe(JOB);
    expect(jobIdOfUrl(`/api/history/${JOB}`)).toBe(JOB);
    expect(jobIdOfUrl('/api/v2/jobs')).toBeNull();
    expect(jobIdOfUrl(`/api/v2/assets/${JOB}`)).toBeNull();
  });

  it('carry request_id and job_id on every line logged for a job request, and redact credentials', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const options = fastifyOptions(loadConfig({ LOG_LEVEL: 'debug' }));
    const logger = pino({ ...(options.logger as object), level: 'debug' }, sink);
    const child = options.childLoggerFactory!.call(null as never, logger as never, { request_id: 'req-1' }, {}, { url: `/api/v2/jobs/${JOB}/cancel` } as never);
    child.error({ req: { id: 'req-1', method: 'GET', url: '/ws?token=secret-key', headers: { authorization: 'Bearer secret-key' } } }, 'unexpected error');
    const other = options.childLoggerFactory!.call(null as never, logger as never, { request_id: 'req-2' }, {}, { url: '/api/v2/jobs' } as never);
    other.info('no job here');
    const [first, second] = lines.map((l) => JSON.parse(l));
    expect(first).toMatchObject({ request_id: 'req-1', job_id: JOB, msg: 'unexpected error' });
    expect(lines[0]).not.toContain('secret-key');
    expect(second).toMatchObject({ request_id: 'req-2', msg: 'no job here' });
    expect(second.job_id).toBeUndefined();
  });
});
