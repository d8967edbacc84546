import type { Job } from '#libs/db';
import type { SignableAsset } from './job-view.js';
import { endedJobText, jobFromEndedText, renderJob, type JobWithOutputs } from './job-view.js';

// A request waiting on its job (`Prefer: wait`) answers with the job as its run ended it instead of
// reading it back: the two must render the same Job.

const row = {
  id: '6f1c1a52-6a3f-4c1e-9d55-0f0b6a9a2c01',
  accountId: '0b4b8a57-7d0e-4a43-9f59-3a8f7e0c9d11',
  status: 'succeeded',
  createdAt: new Date('2026-11-22T10:00:00.001Z'),
  startedAt: new Date('2026-11-22T10:00:00.010Z'),
  completedAt: new Date('2026-11-22T10:00:00.030Z'),
  expiresAt: new Date('2026-11-29T10:00:00Z'),
  deadlineAt: null,
  progress: null,
  workflow: { '1': { class_type: 'EmptyImage', inputs: {} }, '2': { class_type: 'SaveImage', inputs: {} } },
  error: null,
  queueMs: 9,
  executionMs: 20,
  logText: 'secret log',
} as unknown as Job;

const outputs = [
  { assetId: 'a1a1a1a1-0000-4000-8000-000000000001', nodeId: '2', name: 'one_00001_.png', type: 'image', hash: 'ab'.repeat(32), contentType: 'image/png', sizeBytes: 812 },
  { assetId: 'a1a1a1a1-0000-4000-8000-000000000002', nodeId: '3', name: 'note.txt', type: 'text', hash: 'cd'.repeat(32), contentType: 'text/plain; charset=utf-8', sizeBytes: 5 },
];

/** The same job as the API reads it back (JobStore.findInScope). */
const readBack = {
  ...row,
  outputs: outputs.map((o, i) => ({
    id: BigInt(i + 1),
    jobId: row.id,
    assetId: o.assetId,
    nodeId: o.nodeId,
    type: o.type,
    engineKey: 'images',
    engineType: 'output',
    name: o.name,
    asset: { blobHash: o.hash, contentType: o.contentType, filePath: o.name, expiresAt: row.expiresAt, blob: { sizeBytes: BigInt(o.sizeBytes) } },
  })),
} as unknown as JobWithOutputs;

const parts = {
  self: `/api/v2/jobs/${row.id}`,
  captureLogs: true,
  // Everything signing reads of an asset shows in the link.
  sign: async (asset: SignableAsset, fileName: string) => ({ url: `https://cdn.example/${asset.blobHash}/${fileName}?ct=${asset.contentType}`, expiresAt: asset.expiresAt ?? new Date(0) }),
};

describe('the job as its run ended it', () => {
  it('renders exactly as the job read back', async () => {
    const text = endedJobText(row, outputs)!;
    expect(text).not.toContain('secret log');
    const ended = jobFromEndedText(text)!;
    expect(await renderJob(ended, null, parts)).toEqual(await renderJob(readBack, null, parts));
  });

  it('keeps an error, a deadline and a stored progress', async () => {
    const failed = { ...row, status: 'failed', error: { code: 'node_execution_error', message: 'boom', node_id: '2' }, deadlineAt: new Date('2026-11-22T11:00:00Z'), progress: { value: 0.5, nodes_done: 1, nodes_total: 2, current_node: '2', current_node_class: 'SaveImage', step: null, steps: null, message: null } } as unknown as Job;
    const ended = jobFromEndedText(endedJobText(failed, [])!)!;
    expect(await renderJob(ended, null, parts)).toEqual(await renderJob({ ...failed, outputs: [] }, null, parts));
  });

  it('is not sent for more outputs than a message should carry, and not read from other text', () => {
    expect(endedJobText(row, Array.from({ length: 101 }, () => outputs[0]!))).toBeNull();
    expect(jobFromEndedText('not json')).toBeNull();
  });
});
