import { randomUUID } from 'node:crypto';
import { startCloud, textToImage, type Cloud } from '../support/cloud.js';
import { bearer, call } from '../support/http.js';
import { pngTextChunks } from '../support/media.js';
import { TestStack } from '../support/stack.js';

// A workflow reaches the engine, and reads back, exactly as sent: the engine's seeds range to
// 2^64 - 1 and Python clients send them as plain integers, which a JavaScript number cannot hold.
describe('workflows keep every digit', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let alice: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack);
    alice = await stack.account({ name: 'alice' });
  }, 60_000);
  afterAll(() => stack.close());

  /** A text-to-image body whose seed is the literal `seed`, written as JSON text. */
  const body = (seed: string) => JSON.stringify({ workflow: textToImage(1, 2) }).replace('"seed":1,', `"seed":${seed},`);
  const submit = (text: string, headers: Record<string, string> = {}) =>
    call(`${cloud.api.url}/api/v2/jobs`, { method: 'POST', headers: bearer(alice.key, { 'content-type': 'application/json', ...headers }), body: text });

  it('an integer beyond 2^53 runs on the engine and reads back digit for digit', async () => {
    const seed = '18446744073709551615';
    const res = await submit(body(seed), { prefer: 'wait=20' });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('succeeded');
    const workflow = await call(`${cloud.api.url}/api/v2/jobs/${res.body.id}/workflow`, { headers: bearer(alice.key) });
    expect(workflow.text).toContain(`"seed":${seed},`);
    // What the engine ran: the prompt it embedded in the image (as the tenant sent it).
    const png = Buffer.from(await (await fetch(res.body.outputs[0].url)).arrayBuffer());
    expect(Object.fromEntries(pngTextChunks(png)).prompt).toContain(`"seed": ${seed},`);
    // And as the engine itself recorded it.
    const job = await stack.db.job.findUniqueOrThrow({ where: { id: res.body.id } });
    const history = await call(`${cloud.engines[0]!.url}/history/${job.enginePromptId}`);
    expect(history.text).toContain(`"seed": ${seed},`);
  });

  it('an Idempotency-Key tells apart two seeds that differ past the 53rd bit', async () => {
    const key = randomUUID();
    const first = await submit(body('18446744073709551614'), { 'idempotency-key': key });
    expect(first.status).toBe(201);
    const same = await submit(body('18446744073709551614'), { 'idempotency-key': key });
    const other = await submit(body('18446744073709551615'), { 'idempotency-key': key });
    expect(same.status).toBe(422);
    expect(other.status).toBe(422);
    expect(same.body.error.message).not.toContain('different request body');
    expect(other.body.error.message).toContain('different request body');
  });

  it('validates such integers exactly against the bounds', async () => {
    const over = await submit(body('18446744073709551616'));
    expect(over.status).toBe(422);
    expect(over.text).toContain('bigger than max');
    const negative = await submit(body('-9007199254740993'));
    expect(negative.status).toBe(422);
    expect(negative.text).toContain('smaller than min');
  });
});
