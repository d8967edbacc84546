import { loadConfig } from '#libs/config';
import { createBlobStore } from '#libs/storage';
import type { TestStack } from './stack.js';

/** Reads stored blobs directly from the stack's store, bypassing the API. */
export const S3BlobStoreProbe = {
  async read(stack: TestStack, hash: string): Promise<Buffer> {
    const store = createBlobStore(loadConfig(stack.env()));
    const parts: Buffer[] = [];
    for await (const c of await store.read(hash)) parts.push(Buffer.from(c as Buffer));
    return Buffer.concat(parts);
  },
};
