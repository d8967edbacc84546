import { randomUUID } from 'node:crypto';
import type { Steering } from './steering.js';

// Generations of the submit-then-poll providers. Each runs on the clock from its submission to
// `readyAt`, whoever asks about it: a generation keeps running after its caller left, and a later
// poll (or a retry's collection) finds it finished.

export interface Task<T = Record<string, unknown>> {
  id: string;
  provider: string;
  createdAt: number;
  /** When it starts running (before: queued, or THROTTLED at Runway). */
  startsAt: number;
  readyAt: number;
  steering: Steering;
  /** What the provider keeps about it: the request, the media it produced. */
  data: T;
}

export type TaskPhase = 'queued' | 'running' | 'done';

export class TaskClock {
  private readonly tasks = new Map<string, Task>();

  create<T extends Record<string, unknown>>(provider: string, steering: Steering, durationMs: number, data: T, options: { id?: string; queuedMs?: number } = {}): Task<T> {
    const now = Date.now();
    const startsAt = now + (options.queuedMs ?? 0);
    const task: Task<T> = { id: options.id ?? randomUUID(), provider, createdAt: now, startsAt, readyAt: startsAt + durationMs, steering, data };
    this.tasks.set(task.id, task);
    return task;
  }

  get<T = Record<string, unknown>>(provider: string, id: string): Task<T> | undefined {
    const task = this.tasks.get(id);
    return task && task.provider === provider ? (task as Task<T>) : undefined;
  }

  phase(task: Task, now = Date.now()): TaskPhase {
    if (now >= task.readyAt) return 'done';
    return now >= task.startsAt ? 'running' : 'queued';
  }

  /** How far along a running generation is, 0 to 1. */
  progress(task: Task, now = Date.now()): number {
    if (now >= task.readyAt) return 1;
    if (now <= task.startsAt) return 0;
    return Math.round(((now - task.startsAt) / (task.readyAt - task.startsAt)) * 100) / 100;
  }

  all(): Task[] {
    return [...this.tasks.values()];
  }
}
