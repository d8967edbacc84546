import { startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, jsonInit } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { TestStack } from '../support/stack.js';

describe('fair scheduling across accounts', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack, { engine: { SIM_STEP_MS: '1' } });
  });
  afterAll(() => stack.close());

  it('does not hold back one account\'s single job behind another\'s burst of 1,000 beyond one job slot', async () => {
    const t0 = Date.now();
    const burst = await stack.account({ tier: 'enterprise', name: 'burst' });
    const single = await stack.account({ tier: 'pro', name: 'single' });
    const submit = (key: string, color: number) => call(`${cloud.api.url}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(color) }, bearer(key)));

    let next = 0;
    const burstIds: string[] = [];
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < 1000) {
          const i = next++;
          const res = await submit(burst.key, i % 256);
          expect(res.status).toBe(201);
          burstIds.push(res.body.id);
        }
      }),
    );
    expect(burstIds).toHaveLength(1000);
    console.log(`burst of 1000 submitted in ${Date.now() - t0} ms`);

    const mine = await submit(single.key, 1);
    expect(mine.status).toBe(201);
    // Only jobs already handed to a worker can be ahead of it.
    const position = mine.body.queue_position;
    if (mine.body.status === 'queued') expect(position).toBeLessThanOrEqual(1);

    await waitUntil(async () => (await stack.db.job.findUniqueOrThrow({ where: { id: mine.body.id } })).startedAt !== null, 30_000, 'the single job to start');
    const started = (await stack.db.job.findUniqueOrThrow({ where: { id: mine.body.id } })).startedAt!;
    const overtaking = await stack.db.job.count({
      where: { accountId: burst.id, startedAt: { gt: new Date(Date.parse(mine.body.created_at)), lt: started } },
    });
    expect(overtaking).toBeLessThanOrEqual(1);

    // The burst's newest waiting jobs, read in one request: later jobs stand further back.
    const page = await call(`${cloud.api.url}/api/v2/jobs?status=queued&limit=5`, { headers: bearer(burst.key) });
    const positions = page.body.data.map((j: { queue_position: number }) => j.queue_position);
    expect(positions).toHaveLength(5);
    for (let i = 1; i < positions.length; i++) expect(positions[i - 1]).toBeGreaterThan(positions[i]);
    expect(positions.at(-1)).toBeGreaterThanOrEqual(0);

    const running = await call(`${cloud.api.url}/api/v2/jobs/${mine.body.id}`, { headers: bearer(single.key) });
    expect(running.body.queue_position).toBeNull();

    // Clear the rest of the burst.
    await stack.db.job.updateMany({ where: { accountId: burst.id, status: 'queued' }, data: { status: 'canceled', completedAt: new Date() } });
  }, 120_000);
});
