import { ComfyCloud, ComfyCloudError, unwrap } from '../../clients/typescript/src/index.js';
import { RouterWorld, type Workspace } from '../router/router-world.js';

// The client against the model router (API, partner simulator): every router operation through
// the generated client, and callModel's keyed retry after the router's deadline.

const DEADLINE_MS = 1_500;
const IMAGE = 'openai/gpt-image-1';
const img = (prompt: string) => ({ model: 'gpt-image-1', prompt });

describe('TypeScript client: model router', () => {
  const world = new RouterWorld();
  let ws: Workspace;
  let client: ComfyCloud;

  beforeAll(async () => {
    await world.open({ ROUTER_DEADLINE_MS: String(DEADLINE_MS) });
    ws = await world.workspace();
    client = new ComfyCloud({ baseUrl: world.api.url, routerToken: ws.token });
  }, 60_000);
  afterAll(() => world.close());

  it('lists the catalog a page at a time, reads a model and its input schema', async () => {
    const page = unwrap(await client.api.GET('/v1/models', { params: { query: { limit: 2 } } }));
    expect(page.data).toHaveLength(2);
    expect(page.next_cursor).toEqual(expect.any(String));
    const next = unwrap(await client.api.GET('/v1/models', { params: { query: { limit: 2, cursor: page.next_cursor! } } }));
    expect(next.data.map((m) => m.id)).not.toContain(page.data[0]!.id);
    const [provider, model] = IMAGE.split('/') as [string, string];
    const detail = unwrap(await client.api.GET('/v1/models/{provider}/{model}', { params: { path: { provider, model } } }));
    expect(detail.id).toBe(IMAGE);
    const schema = await client.api.GET('/v1/models/{provider}/{model}/openapi.json', { params: { path: { provider, model } } });
    expect(schema.response.status).toBe(200);
    expect(JSON.stringify(schema.data)).toContain('prompt');
  });

  it('calls a model and reports its cost; a refusal is a ComfyCloudError with the router bucket', async () => {
    const result = await client.callModel<{ data: Array<{ b64_json: string }> }>(IMAGE, img('a lighthouse'));
    expect(result.body.data[0]!.b64_json).toMatch(/^[A-Za-z0-9+/]+=*$/);
    expect(result.creditsUsed).toBe(17);
    expect(result.replayed).toBe(false);
    expect(result.requestId).toMatch(/^[0-9a-f-]{36}$/);

    const refused = await client.callModel(IMAGE, { model: 'gpt-image-1' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ComfyCloudError);
    expect(refused).toMatchObject({ status: 422, code: 'invalid_input' });
    const unknown = await client.callModel('acme/nothing', {}).catch((e: unknown) => e);
    expect(unknown).toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it('outlasts the router deadline: the keyed retry collects the generation already running, none is started twice', async () => {
    const prompt = `patient [[slow:2500]] ${Date.now()}`;
    const started = Date.now();
    const result = await client.callModel<{ data: unknown[] }>(IMAGE, img(prompt));
    expect(Date.now() - started).toBeGreaterThanOrEqual(DEADLINE_MS);
    expect(result.body.data).toHaveLength(1);
    expect(world.sim.requests('openai', { method: 'POST' }).filter((r) => r.body.includes(prompt))).toHaveLength(1);

    // Without retries the deadline is the caller's to handle.
    const once = await client.callModel(IMAGE, img(`hasty [[slow:2500]] ${Date.now()}`), { attempts: 1 }).catch((e: unknown) => e);
    expect(once).toMatchObject({ status: 504, code: 'deadline_exceeded' });
  });

  it('takes the account API key in place of a router token', async () => {
    const { key } = await world.stack.account();
    const byKey = new ComfyCloud({ baseUrl: world.api.url, apiKey: key });
    // The key's account has no router entitlement yet: refused in the router's shape, not v2's.
    expect(await byKey.callModel(IMAGE, img('x')).catch((e: unknown) => e)).toMatchObject({ code: 'not_enabled' });
    expect(unwrap(await new ComfyCloud({ baseUrl: world.api.url, apiKey: 'cck_wrong', routerToken: ws.token }).api.GET('/v1/models', { params: { query: { limit: 1 } } })).data).toHaveLength(1);
  });
});
