import { Logger } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import type { Db, Job } from '#libs/db';
import type { BlobStore } from '#libs/storage';
import type { QueuePositions } from '#libs/jobs';
import { fakeJobStore } from '../../../../test/support/fake-job-store.js';
import { JobViews, type JobWithOutputs } from './job-views.service.js';

// The answer to a submission once its job exists: a database failure while rendering it must not
// become an error, which a client retrying without an Idempotency-Key would answer with a second job.

const config = { api: { basePath: '/base' }, jobs: { captureLogs: true } } as Config;
const request = { raw: {}, headers: {} } as unknown as FastifyRequest;
const down = () => Promise.reject(new Error("Can't reach database server"));

const inserted = {
  id: '6f1c1a52-6a3f-4c1e-9d55-0f0b6a9a2c01',
  accountId: '0b4b8a57-7d0e-4a43-9f59-3a8f7e0c9d11',
  status: 'queued',
  createdAt: new Date('2026-11-22T10:00:00Z'),
  startedAt: null,
  completedAt: null,
  expiresAt: new Date('2026-11-29T10:00:00Z'),
  progress: null,
  workflow: { '1': { class_type: 'EmptyImage', inputs: {} } },
  error: null,
  queueMs: null,
  executionMs: null,
} as unknown as Job;

/** The views over a store holding `row` now (read back after a wait), or failing its reads (`read`). */
function views(positions: Partial<QueuePositions>, read?: { row: Job } | { fails: () => Promise<never> }): JobViews {
  const jobs = fakeJobStore(read && 'row' in read ? [read.row] : [], read && 'fails' in read ? { findInScope: read.fails } : {});
  return new JobViews(jobs, config, {} as BlobStore, positions as QueuePositions, {} as Db);
}

beforeAll(() => Logger.overrideLogger(false));

describe('JobViews.renderCreated', () => {
  it('answers the job with its queue position', async () => {
    const view = await views({ of: async () => new Map([[inserted.id, 4]]) }).renderCreated(inserted, request, false);
    expect(view).toMatchObject({ id: inserted.id, status: 'queued', queue_position: 4, outputs: [], urls: { self: `/base/api/v2/jobs/${inserted.id}` } });
  });

  it('answers the job, at position 0, when the position cannot be counted: never null while queued', async () => {
    const view = await views({ of: down }).renderCreated(inserted, request, false);
    expect(view).toMatchObject({ id: inserted.id, status: 'queued', queue_position: 0, created_at: '2026-11-22T10:00:00.000Z' });
  });

  it('after a wait, answers the job as it stands now', async () => {
    const done = { ...inserted, status: 'succeeded', completedAt: new Date('2026-11-22T10:00:01Z'), outputs: [] } as unknown as JobWithOutputs;
    let counted = 0;
    const count = async () => {
      counted++;
      return new Map<string, number>();
    };
    const view = await views({ of: count }, { row: done }).renderCreated(inserted, request, true);
    expect(view).toMatchObject({ status: 'succeeded', queue_position: null, completed_at: '2026-11-22T10:00:01.000Z' });
    expect(counted).toBe(0);
  });

  it('after a wait, answers the job as its run ended it without reading it back', async () => {
    const ended = { ...inserted, status: 'succeeded', completedAt: new Date('2026-11-22T10:00:01Z'), outputs: [] } as unknown as JobWithOutputs;
    const view = await views({ of: down }, { fails: down }).renderCreated(inserted, request, true, ended);
    expect(view).toMatchObject({ id: inserted.id, status: 'succeeded', queue_position: null, completed_at: '2026-11-22T10:00:01.000Z' });
  });

  it('after a wait, answers the job as inserted when it cannot be read back', async () => {
    const view = await views({ of: async () => new Map([[inserted.id, 0]]) }, { fails: down }).renderCreated(inserted, request, true);
    expect(view).toMatchObject({ id: inserted.id, status: 'queued', queue_position: 0 });
  });

  it('with the database gone altogether, still answers the job', async () => {
    const view = await views({ of: down }, { fails: down }).renderCreated(inserted, request, true);
    expect(view).toMatchObject({ id: inserted.id, status: 'queued', queue_position: 0 });
  });
});
