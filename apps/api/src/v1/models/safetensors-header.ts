import type { Readable } from 'node:stream';
import type { BlobStore } from '#libs/storage';

/** The engine reads at most this much header for `/view_metadata` (comfy.utils.safetensors_header). */
const MAX_HEADER = 1024 * 1024;

async function readRange(store: BlobStore, hash: string, start: number, end: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of (await store.read(hash, { start, end })) as Readable) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/**
 * A stored safetensors file's `__metadata__` (8-byte little-endian header length, then the JSON
 * header), reading only the header; null for a file that has none or is no safetensors file.
 */
export async function safetensorsMetadata(store: BlobStore, hash: string): Promise<Record<string, unknown> | null> {
  const size = await store.size(hash);
  if (size === null || size < 8) return null;
  const length = (await readRange(store, hash, 0, 7)).readBigUInt64LE(0);
  if (length === 0n || length > BigInt(MAX_HEADER) || 8n + length > BigInt(size)) return null;
  try {
    const header = JSON.parse((await readRange(store, hash, 8, 8 + Number(length) - 1)).toString('utf8')) as unknown;
    const metadata = typeof header === 'object' && header !== null ? (header as { __metadata__?: unknown }).__metadata__ : undefined;
    return typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata) ? (metadata as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
