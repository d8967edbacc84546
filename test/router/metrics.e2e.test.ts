import { call } from '../support/http.js';
import { RouterWorld, type Workspace } from './router-world.js';

describe('router metrics', () => {
  const world = new RouterWorld();
  let ws: Workspace;

  beforeAll(async () => {
    await world.open();
    ws = await world.workspace();
  });
  afterAll(() => world.close());

  it('counts calls by model and bucket, times them, and returns in-flight spend to zero', async () => {
    expect((await world.post(ws.token, 'openai/gpt-image-1', { model: 'gpt-image-1', prompt: 'a cat' })).status).toBe(200);
    const rejected = await world.post(ws.token, 'openai/gpt-image-1', { model: 'gpt-image-1', prompt: 42 });
    expect(rejected.status).toBeGreaterThanOrEqual(400);
    const text = (await call(`${world.api.url}/metrics`)).text;
    expect(text).toMatch(/router_calls_total\{[^}]*model="openai\/gpt-image-1"[^}]*bucket="success"[^}]*\} 1/);
    expect(text).toMatch(/router_call_duration_seconds_count\{[^}]*model="openai\/gpt-image-1"[^}]*\} [1-9]/);
    expect(text).toMatch(/^router_inflight_spend_cents 0$/m);
  });
});
