import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './processes.js';

/** Where each reliability suite leaves its rows; `test/reliability/write-report.js` turns them into .data/reliability.md. */
export const RELIABILITY_DIR = path.join(ROOT, '.data', 'reliability');

export interface ReliabilityRow {
  /** The fault, input or abuse tried, in a few words. */
  tried: string;
  /** How many times (requests, cases, restarts, clients). */
  count: number;
  /** What was observed, in a few words: the figures, not just "ok". */
  outcome: string;
  /** Whether the promise held. A row is written whether it held or not. */
  held: boolean;
}

/**
 * One section of the reliability report (.data/reliability.md). Suites record what they tried as they go and `save()` in
 * afterAll, so a failing run still reports what it saw.
 */
export class ReliabilityReport {
  private readonly rows: ReliabilityRow[] = [];

  constructor(
    readonly section: string,
    /** Orders the sections in the document. */
    readonly order: number,
  ) {}

  record(row: ReliabilityRow): void {
    this.rows.push(row);
  }

  save(): void {
    mkdirSync(RELIABILITY_DIR, { recursive: true });
    const file = path.join(RELIABILITY_DIR, `${this.section.toLowerCase().replace(/[^a-z0-9]+/g, '-')}.json`);
    writeFileSync(file, JSON.stringify({ section: this.section, order: this.order, at: new Date().toISOString(), rows: this.rows }, null, 2));
  }
}
