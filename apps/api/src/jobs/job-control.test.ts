import type { Job } from '#libs/db';
import { JobControl } from './job-control.service.js';

// A cancel moves the row to `canceling` first and then tells the worker through Redis. If Redis
// fails in between, the client gets an error and retries: that retry must tell the worker, or
// the job runs on to its end although its cancel was accepted.

const JOB_ID = '00000000-0000-4000-8000-000000000002';

function world() {
  let row = { id: JOB_ID, accountId: 'account', status: 'running' } as Job;
  const told: string[] = [];
  let redisDown = true;
  const db = {
    job: {
      update: async ({ where, data }: { where: { status: { in: string[] } }; data: { status: Job['status'] } }) => {
        if (!where.status.in.includes(row.status)) throw Object.assign(new Error('no row'), { code: 'P2025' });
        row = { ...row, status: data.status };
        return row;
      },
      findUnique: async () => row,
    },
  };
  const pipeline = {
    keys: { cancelFlag: (id: string) => `cancel:${id}`, cancelChannel: 'cancels' },
    redis: {
      set: async () => {
        if (redisDown) throw new Error('Connection is closed.');
        return 'OK';
      },
      publish: async (_channel: string, id: string) => told.push(id),
    },
    events: { append: async () => '1-0' },
  };
  const control = new JobControl(db as never, { jobs: { creditsPerSecond: 1 } } as never, pipeline as never);
  return { control, told, row: () => row, redisBack: () => (redisDown = false) };
}

describe('JobControl.cancel', () => {
  it('tells the worker again when a cancel is repeated after the first signal failed', async () => {
    const w = world();
    await expect(w.control.cancel(w.row())).rejects.toThrow('Connection is closed.');
    expect(w.row().status).toBe('canceling');
    expect(w.told).toEqual([]);
    w.redisBack();
    await w.control.cancel(w.row());
    expect(w.told).toEqual([JOB_ID]);
    expect(w.row().status).toBe('canceling');
  });
});
