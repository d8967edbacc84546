import { Readable } from 'node:stream';
import { jest } from '@jest/globals';
import type { Db } from '#libs/db';
import type { EngineClient } from '#libs/engine-protocol';
import type { JobEventLog } from '#libs/jobs';
import type { BlobStore } from '#libs/storage';
import { OutputStore, OutputStoreError } from './output-store.js';
import type { Log } from '#libs/logging';

// Each try streams the output from the engine again. A store that fails before it has read the
// download must not leave that download's connection to the engine open.

describe('OutputStore', () => {
  afterEach(() => jest.useRealTimers());

  it('closes every engine download a failing store left unread', async () => {
    jest.useFakeTimers();
    const downloads: Readable[] = [];
    const engine = {
      viewWithInfo: async () => {
        const stream = new Readable({ read() {} }); // an engine still sending
        downloads.push(stream);
        return { stream, contentType: 'image/png' };
      },
    } as unknown as EngineClient;
    const store = { put: async () => Promise.reject(new Error('bucket unavailable')) } as unknown as BlobStore;
    const log = Object.assign(() => undefined, { child: () => log }) as unknown as Log;
    const outputs = new OutputStore({} as Db, store, engine, {} as JobEventLog, log, { workerId: 'w1', attempt: 1 });

    const saving = outputs.save(
      { id: '00000000-0000-4000-8000-000000000001', accountId: '00000000-0000-4000-8000-000000000002', expiresAt: new Date(), attempts: 1 },
      '9',
      { kind: 'file', key: 'images', index: 0, ref: { filename: 'a.png', subfolder: '', type: 'output' } },
    );
    const failed = expect(saving).rejects.toThrow(OutputStoreError);
    await jest.advanceTimersByTimeAsync(60_000);
    await failed;
    expect(downloads.length).toBeGreaterThan(1);
    expect(downloads.filter((d) => !d.destroyed)).toEqual([]);
  });
});
