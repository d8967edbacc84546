/**
 * Order of node execution, as the engine's ExecutionList decides it: a topological
 * dissolve that prefers output nodes (and nodes feeding them) whenever several are ready.
 */
import type { ApiPrompt } from '#libs/engine-protocol';

export function isLink(v: unknown): v is [string, number] {
  return Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'number';
}

export class ExecutionList {
  private readonly pending = new Map<string, true>();
  private readonly blockCount = new Map<string, number>();
  private readonly blocking = new Map<string, Map<string, Set<number>>>();
  private staged: string | undefined;

  constructor(
    private readonly prompt: ApiPrompt,
    private readonly isCached: (nodeId: string) => boolean,
    private readonly isOutput: (nodeId: string) => boolean,
  ) {}

  addNode(nodeId: string): void {
    const stack = [nodeId];
    const links: Array<[string, number, string]> = [];
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (this.pending.has(id)) continue;
      this.pending.set(id, true);
      this.blockCount.set(id, 0);
      this.blocking.set(id, new Map());
      for (const value of Object.values(this.prompt[id]?.inputs ?? {})) {
        if (isLink(value) && !this.isCached(value[0])) {
          stack.push(value[0]);
          links.push([value[0], value[1], id]);
        }
      }
    }
    for (const [from, socket, to] of links) this.addStrongLink(from, socket, to);
  }

  private addStrongLink(from: string, socket: number, to: string): void {
    if (this.isCached(from)) return;
    this.addNode(from);
    const blocked = this.blocking.get(from)!;
    if (!blocked.has(to)) {
      blocked.set(to, new Set());
      this.blockCount.set(to, (this.blockCount.get(to) ?? 0) + 1);
    }
    blocked.get(to)!.add(socket);
  }

  isEmpty(): boolean {
    return this.pending.size === 0;
  }

  /** The next node to run, or an error when what is left only waits on itself (a cycle). */
  stage(): { nodeId: string } | { cycle: string[] } {
    const ready = [...this.pending.keys()].filter((id) => this.blockCount.get(id) === 0);
    if (ready.length === 0) return { cycle: [...this.pending.keys()] };
    this.staged = this.pickFriendly(ready);
    return { nodeId: this.staged };
  }

  private pickFriendly(ready: string[]): string {
    for (const id of ready) if (this.isOutput(id)) return id;
    for (const id of ready) for (const b of this.blocking.get(id)!.keys()) if (this.isOutput(b)) return id;
    for (const id of ready)
      for (const b of this.blocking.get(id)!.keys()) for (const b2 of this.blocking.get(b)?.keys() ?? []) if (this.isOutput(b2)) return id;
    return ready[0]!;
  }

  complete(): void {
    const id = this.staged!;
    this.pending.delete(id);
    for (const blocked of this.blocking.get(id)!.keys()) this.blockCount.set(blocked, this.blockCount.get(blocked)! - 1);
    this.blocking.delete(id);
    this.staged = undefined;
  }
}
