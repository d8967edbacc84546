import type { Redis } from 'ioredis';
import type { JobKeys } from './keys.js';

export type WorkerState = 'starting' | 'idle' | 'busy' | 'stopping';

export interface WorkerInfo {
  id: string;
  state: WorkerState;
  jobId: string | null;
  stage?: string;
  engineReady: boolean;
  at: number;
}

// Workers report every second; one silent for this long is taken for dead.
export const WORKER_STALE_MS = 5_000;

/** Each worker process reports its state; the dispatcher only fills idle, live workers. */
export class WorkerRegistry {
  constructor(
    private readonly redis: Redis,
    private readonly keys: JobKeys,
  ) {}

  async report(info: Omit<WorkerInfo, 'at'>): Promise<void> {
    await this.redis.hset(this.keys.workers, info.id, JSON.stringify({ ...info, at: Date.now() }));
  }

  async remove(workerId: string): Promise<void> {
    await this.redis.hdel(this.keys.workers, workerId);
  }

  async list(now = Date.now()): Promise<WorkerInfo[]> {
    const all = await this.redis.hgetall(this.keys.workers);
    const live: WorkerInfo[] = [];
    for (const [id, text] of Object.entries(all)) {
      try {
        const info = JSON.parse(text) as WorkerInfo;
        if (now - info.at <= WORKER_STALE_MS) live.push(info);
        else if (now - info.at > 10 * WORKER_STALE_MS) await this.redis.hdel(this.keys.workers, id);
      } catch {
        await this.redis.hdel(this.keys.workers, id);
      }
    }
    return live;
  }
}

/**
 * A Lua function for scripts that read the registry where it is (the dispatcher's): how many
 * workers can run a job now or when their current one ends, that is idle or busy, their engine
 * answering, and heard from within WORKER_STALE_MS of `nowMs`. `key` is JobKeys.workers.
 */
export const READY_WORKERS_LUA = `
local function readyWorkers(key, nowMs)
  local ready = 0
  for _, text in ipairs(redis.call('HVALS', key)) do
    local ok, w = pcall(cjson.decode, text)
    if ok and type(w) == 'table' and (w.state == 'idle' or w.state == 'busy') and w.engineReady == true
        and type(w.at) == 'number' and nowMs - w.at <= ${WORKER_STALE_MS} then
      ready = ready + 1
    end
  end
  return ready
end`;
