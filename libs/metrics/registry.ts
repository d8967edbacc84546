import { Registry } from 'prom-client';
import { ROLE_METRICS, type MetricsRole } from './definitions.js';

export type Collector = () => Promise<void>;

/** The /metrics of one process: its role's metrics, refreshed by collectors at scrape time. */
export class ProcessMetrics {
  readonly registry = new Registry();
  private readonly collectors: Collector[] = [];
  private lastCollect: { at: number; done: Promise<void> } | null = null;

  constructor(
    role: MetricsRole,
    /** Scrapes closer together than this reuse the last collection (several Prometheus servers, a curl loop). */
    private readonly minCollectIntervalMs = 1000,
  ) {
    for (const metric of ROLE_METRICS[role]) this.registry.registerMetric(metric);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Runs before each scrape; a failing collector keeps the previous values rather than failing the scrape. */
  addCollector(collector: Collector): void {
    this.collectors.push(collector);
  }

  async render(): Promise<string> {
    const now = Date.now();
    if (!this.lastCollect || now - this.lastCollect.at >= this.minCollectIntervalMs) {
      this.lastCollect = { at: now, done: Promise.all(this.collectors.map((c) => c().catch(() => undefined))).then(() => undefined) };
    }
    await this.lastCollect.done;
    return this.registry.metrics();
  }
}
