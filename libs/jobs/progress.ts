import type { ProgressView } from '#libs/contracts';

interface NodeInfo {
  classType: string;
  steps: number | null;
}

/**
 * Weighted progress (decisions.md): each node counts 1, a node that reports steps counts 1 + steps,
 * cached nodes count as done. Every snapshot is complete and `value` never goes backwards.
 */
export class ProgressTracker {
  private readonly nodes = new Map<string, NodeInfo>();
  private readonly done = new Set<string>();
  private current: string | null = null;
  private step: number | null = null;
  private lastValue = 0;

  constructor(workflow: Record<string, { class_type?: unknown; inputs?: Record<string, unknown> }>) {
    for (const [id, node] of Object.entries(workflow)) {
      const steps = node.inputs?.steps;
      this.nodes.set(id, {
        classType: typeof node.class_type === 'string' ? node.class_type : 'unknown',
        steps: typeof steps === 'number' && Number.isInteger(steps) && steps > 0 ? steps : null,
      });
    }
  }

  cached(nodeIds: string[]): void {
    for (const id of nodeIds) if (this.nodes.has(id)) this.done.add(id);
  }

  executing(nodeId: string | null): void {
    if (this.current && this.current !== nodeId) this.done.add(this.current);
    this.current = nodeId && this.nodes.has(nodeId) ? nodeId : null;
    this.step = null;
  }

  stepped(nodeId: string, value: number, max: number): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    if (max > 0 && node.steps !== max) node.steps = max;
    this.current = nodeId;
    this.step = Math.max(0, Math.min(value, max));
  }

  finished(nodeId: string): void {
    if (this.nodes.has(nodeId)) this.done.add(nodeId);
    if (this.current === nodeId) {
      this.current = null;
      this.step = null;
    }
  }

  complete(): void {
    for (const id of this.nodes.keys()) this.done.add(id);
    this.current = null;
    this.step = null;
  }

  snapshot(): ProgressView {
    let total = 0;
    let done = 0;
    for (const [id, node] of this.nodes) {
      const weight = 1 + (node.steps ?? 0);
      total += weight;
      if (this.done.has(id)) done += weight;
      else if (id === this.current && this.step !== null) done += this.step;
    }
    const value = total === 0 ? 1 : Math.min(1, done / total);
    this.lastValue = Math.max(this.lastValue, value);
    const current = this.current ? this.nodes.get(this.current) : undefined;
    const steps = current?.steps ?? null;
    return {
      value: Math.round(this.lastValue * 10_000) / 10_000,
      nodes_done: this.done.size,
      nodes_total: this.nodes.size,
      current_node: this.current,
      current_node_class: current?.classType ?? null,
      step: this.current ? this.step : null,
      steps: this.current ? steps : null,
      message: current ? `${current.classType}${this.step !== null && steps ? ` step ${this.step}/${steps}` : ''}` : null,
    };
  }
}
