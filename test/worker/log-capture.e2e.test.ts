import { isTerminal } from '#libs/contracts';
import { startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, jsonInit } from '../support/http.js';
import { TestStack } from '../support/stack.js';

/** EmptyImage -> SimFail: the engine prints "!!! Exception during processing !!! <message>". */
function failing(message: string): Record<string, any> {
  return {
    '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } },
    '2': { class_type: 'SimFail', inputs: { source: ['1', 0], exception_type: 'RuntimeError', message } },
  };
}

const count = (text: string, part: string) => text.split(part).length - 1;

// The engine pushes what it prints over its socket apart from the execution messages, and prints
// a prompt's last lines ("!!! Exception during processing !!!", "Prompt executed in …") around or
// after the terminal message. The log served once the job is terminal must hold them.
describe('engine log capture', () => {
  const stack = new TestStack('s3');
  let cloud: Cloud;
  let account: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack);
    account = await stack.account();
  });
  afterAll(() => stack.close());

  const origin = () => cloud.api.url;

  /** Submits, polls until the job is terminal, then reads its log at once (polled every 5 ms, not waitUntil's 50: the race is in the first moments). */
  async function runAndReadLog(workflow: Record<string, any>) {
    const submitted = await call(`${origin()}/api/v2/jobs`, jsonInit('POST', { workflow }, bearer(account.key)));
    expect(submitted.status).toBe(201);
    const self = `${origin()}${submitted.body.urls.self}`;
    const until = Date.now() + 20_000;
    let status: string = submitted.body.status;
    while (!isTerminal(status)) {
      if (Date.now() > until) throw new Error(`job ${submitted.body.id} did not end`);
      await new Promise((r) => setTimeout(r, 5));
      status = (await call(self, { headers: bearer(account.key) })).body.status;
    }
    const logs = await call(`${origin()}${submitted.body.urls.logs}`, { headers: bearer(account.key) });
    return { id: submitted.body.id as string, status, logs };
  }

  it('serves each quick job\'s whole log, closing line and exception included, as soon as it ends', async () => {
    const seen: { id: string; status: string; logStatus: number; text: string | null }[] = [];
    for (let i = 0; i < 10; i++) {
      const fails = i % 5 === 4;
      const run = await runAndReadLog(fails ? failing(`boom ${i}`) : tinyImage(i + 1));
      seen.push({ id: run.id, status: run.status, logStatus: run.logs.status, text: run.logs.status === 200 ? run.logs.body.text : null });
      expect(run.status).toBe(fails ? 'failed' : 'succeeded');
    }
    // Checked after all ran, so a failure lists every job whose log is wrong, with what it holds.
    const problems = seen.flatMap((job, i) => {
      const wrong: string[] = [];
      if (job.logStatus !== 200) wrong.push(`logs answered ${job.logStatus}`);
      const text = job.text ?? '';
      // This prompt's lines, once each: nothing lost, nothing from the job before.
      if (count(text, 'got prompt\n') !== 1) wrong.push('"got prompt" not there once');
      if (count(text, 'Prompt executed in ') !== 1) wrong.push('"Prompt executed in" not there once');
      if (i % 5 === 4 && !text.includes(`!!! Exception during processing !!! boom ${i}`)) wrong.push('no exception line');
      return wrong.length ? [`job ${i} (${job.status}): ${wrong.join(', ')}; log ${JSON.stringify(job.text)}`] : [];
    });
    expect(problems).toEqual([]);
  });
});
