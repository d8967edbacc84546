import { createBLAKE3 } from 'hash-wasm';

/**
 * The file's blake3 as the service names blobs (`blake3:<hex>`), computed in the page as the file
 * is read, a piece at a time: a file larger than memory is hashed as well as a small one.
 */
export async function blake3OfFile(file: Blob, onProgress?: (done: number) => void): Promise<string> {
  const hasher = await createBLAKE3();
  hasher.init();
  const reader = file.stream().getReader();
  let done = 0;
  for (;;) {
    const { done: end, value } = await reader.read();
    if (end) break;
    hasher.update(value);
    done += value.byteLength;
    onProgress?.(done);
  }
  return `blake3:${hasher.digest('hex')}`;
}
