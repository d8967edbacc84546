import { describe, expect, it } from '@jest/globals';
import { read } from './support.js';

interface MetricSpec {
  name: string;
  type: 'counter' | 'gauge' | 'histogram';
  labels: string[];
  help: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type: string; uid: string };
  targets?: { refId: string; expr: string; datasource?: { type: string; uid: string } }[];
  panels?: Panel[];
}
interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; type: string; query?: string }[] };
}

const metrics = JSON.parse(read('ops/metrics.json')) as MetricSpec[];
const dashboard = JSON.parse(read('ops/grafana/comfy-cloud.json')) as Dashboard;
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
const targets = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, ...t })));
const byName = new Map(metrics.map((m) => [m.name, m]));

// The series a metric of each type exposes (prom-client and the Prometheus exposition format).
const SERIES_SUFFIXES = { counter: [''], gauge: [''], histogram: ['_bucket', '_sum', '_count'] } as const;

const PROMQL_WORDS = new Set([
  'sum', 'max', 'min', 'avg', 'count', 'by', 'without', 'rate', 'irate', 'increase', 'histogram_quantile',
  'le', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool', 'topk', 'bottomk',
]);

/** Every metric series an expression reads: identifiers that are not functions, keywords or labels. */
function seriesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '{}')
    .replace(/\[[^\]]*\]/g, '[]')
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, '');
  return [...stripped.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()/g)]
    .map((m) => m[1]!)
    .filter((w) => !PROMQL_WORDS.has(w) && !/^\d/.test(w));
}

/** The metric a series belongs to, or undefined when it is none of ops/metrics.json. */
function metricOf(series: string): MetricSpec | undefined {
  for (const m of metrics) {
    if (SERIES_SUFFIXES[m.type].some((suffix) => `${m.name}${suffix}` === series)) return m;
  }
  return undefined;
}

/** Label names an expression groups by or filters on. */
function labelsIn(expr: string): string[] {
  const grouped = [...expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)].flatMap((m) => m[1]!.split(',').map((s) => s.trim()));
  const matched = [...expr.matchAll(/\{([^}]*)\}/g)].flatMap((m) => [...m[1]!.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)].map((x) => x[1]!));
  return [...grouped, ...matched].filter(Boolean);
}

describe('ops/metrics.json', () => {
  it('lists the metrics the services export, with valid names, types and labels', () => {
    expect(metrics.map((m) => m.name).sort()).toEqual(
      [
        'http_request_duration_seconds',
        'http_requests_shed_total',
        'jobs_total',
        'queue_depth',
        'queue_wait_seconds',
        'job_execution_seconds',
        'engine_ready',
        'output_bytes_stored_total',
        'router_calls_total',
        'router_call_duration_seconds',
        'router_inflight_spend_cents',
        'webhook_deliveries_total',
        'webhook_delivery_attempts_total',
        'webhook_oldest_pending_seconds',
      ].sort(),
    );
    for (const m of metrics) {
      expect(m.name).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/);
      expect(['counter', 'gauge', 'histogram']).toContain(m.type);
      expect(m.help.length).toBeGreaterThan(0);
      for (const l of m.labels) expect(l).toMatch(/^[a-zA-Z_][a-zA-Z0-9_]*$/);
      // Histograms reserve `le`; counters are named *_total by convention.
      expect(m.labels).not.toContain('le');
      if (m.type === 'counter') expect(m.name).toMatch(/_total$/);
    }
    expect(byName.get('http_request_duration_seconds')).toMatchObject({ type: 'histogram', labels: ['method', 'route', 'status_code'] });
    expect(byName.get('engine_ready')).toMatchObject({ type: 'gauge', labels: ['worker_id'] });
    expect(byName.get('router_calls_total')).toMatchObject({ type: 'counter', labels: ['model', 'bucket'] });
  });
});

describe('ops/grafana/comfy-cloud.json', () => {
  it('is a Grafana dashboard on a selectable Prometheus data source', () => {
    expect(dashboard.uid).toBe('comfy-cloud');
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(dashboard.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }));
    for (const p of panels.filter((x) => x.type !== 'row')) {
      expect(p.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(p.targets?.length).toBeGreaterThan(0);
    }
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('lays panels out without overlaps inside the 24-column grid', () => {
    const boxes = panels.map((p) => p.gridPos);
    for (const b of boxes) expect(b.x + b.w).toBeLessThanOrEqual(24);
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i]!;
        const b = boxes[j]!;
        const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
        expect({ a: panels[i]!.title, b: panels[j]!.title, overlap }).toEqual({ a: panels[i]!.title, b: panels[j]!.title, overlap: false });
      }
    }
  });

  it('queries only metrics from ops/metrics.json, through series their type has', () => {
    expect(targets.length).toBeGreaterThan(10);
    for (const t of targets) {
      const series = seriesIn(t.expr);
      expect({ panel: t.panel, series: series.length > 0 }).toEqual({ panel: t.panel, series: true });
      for (const s of series) expect({ panel: t.panel, series: s, known: metricOf(s) !== undefined }).toEqual({ panel: t.panel, series: s, known: true });
      // Counters and histogram series only make sense as rates.
      for (const s of series) {
        const m = metricOf(s)!;
        if (m.type !== 'gauge') expect(t.expr).toMatch(new RegExp(`(rate|increase)\\(${s}\\b`));
      }
    }
  });

  it('groups and filters only on labels the metrics carry', () => {
    for (const t of targets) {
      const allowed = new Set(['le', ...seriesIn(t.expr).flatMap((s) => metricOf(s)!.labels)]);
      for (const l of labelsIn(t.expr)) expect({ panel: t.panel, label: l, known: allowed.has(l) }).toEqual({ panel: t.panel, label: l, known: true });
      if (/histogram_quantile/.test(t.expr)) expect(labelsIn(t.expr)).toContain('le');
    }
  });

  it('shows every metric in at least one panel', () => {
    const used = new Set(targets.flatMap((t) => seriesIn(t.expr).map((s) => metricOf(s)!.name)));
    expect([...used].sort()).toEqual(metrics.map((m) => m.name).sort());
  });
});
