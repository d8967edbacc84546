import type { Job } from '#libs/db';
import { fakeJobStore } from '../../../../test/support/fake-job-store.js';
import { JobControl } from './job-control.service.js';

// A cancel moves the row to `canceling` first and then tells the worker through Redis. If Redis
// fails in between, the client gets an error and retries: that retry must tell the worker, or
// the job runs on to its end although its cancel was accepted.

const JOB_ID = '00000000-0000-4000-8000-000000000002';

function world() {
  const told: string[] = [];
  let redisDown = true;
  const jobs = fakeJobStore([{ id: JOB_ID, accountId: 'account', status: 'running' } as Job]);
  const keys = { cancelFlag: (id: string) => `cancel:${id}`, cancelChannel: 'cancels' };
  const redis = {
    set: async () => {
      if (redisDown) throw new Error('Connection is closed.');
      return 'OK';
    },
    publish: async (_channel: string, id: string) => told.push(id),
  };
  const events = { append: async () => '1-0' };
  const unused = {} as never;
  const control = new JobControl(jobs, { jobs: { creditsPerSecond: 1 } } as never, unused, unused, events as never, unused, redis as never, keys as never);
  return { control, told, row: () => jobs.rows.get(JOB_ID)!, redisBack: () => (redisDown = false) };
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
