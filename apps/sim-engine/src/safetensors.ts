/**
 * The check a loader makes before it uses a weights file: a safetensors file starts with the
 * length of its JSON header (8 bytes, little-endian), then the header, an object of tensors
 * `{name: {dtype, shape, data_offsets: [begin, end]}}` and an optional `__metadata__`, whose
 * offsets lie in the data after it. Only the header is read: the sim has no use for the weights.
 */
import { open } from 'node:fs/promises';
import { createHash } from 'node:crypto';

// The safetensors format caps the header at 100 MB.
const MAX_HEADER = 100_000_000;

export class SafetensorError extends Error {
  override name = 'safetensors_rust.SafetensorError';
}

export interface SafetensorsInfo {
  tensors: number;
  metadata: Record<string, string> | null;
  /** A short digest of the header and the file's size: which weights these are. */
  id: string;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export async function readSafetensors(file: string): Promise<SafetensorsInfo> {
  const handle = await open(file, 'r');
  try {
    const size = (await handle.stat()).size;
    const prefix = Buffer.alloc(8);
    if (size < 8 || (await handle.read(prefix, 0, 8, 0)).bytesRead < 8) throw new SafetensorError('Error while deserializing header: HeaderTooSmall');
    const length = prefix.readBigUInt64LE(0);
    if (length > BigInt(MAX_HEADER)) throw new SafetensorError('Error while deserializing header: HeaderTooLarge');
    const n = Number(length);
    if (8 + n > size) throw new SafetensorError('Error while deserializing header: InvalidHeaderLength');
    const header = Buffer.alloc(n);
    await handle.read(header, 0, n, 8);
    let parsed: unknown;
    try {
      parsed = JSON.parse(header.toString('utf8'));
    } catch {
      throw new SafetensorError('Error while deserializing header: InvalidHeaderDeserialization');
    }
    if (!isObject(parsed)) throw new SafetensorError('Error while deserializing header: InvalidHeaderDeserialization');
    const dataBytes = size - 8 - n;
    let tensors = 0;
    for (const [name, entry] of Object.entries(parsed)) {
      if (name === '__metadata__') continue;
      const offsets = isObject(entry) ? entry.data_offsets : undefined;
      if (!isObject(entry) || typeof entry.dtype !== 'string' || !Array.isArray(entry.shape) || !Array.isArray(offsets) || offsets.length !== 2) {
        throw new SafetensorError(`Error while deserializing header: InvalidHeaderDeserialization (tensor ${name})`);
      }
      const [begin, end] = offsets as unknown[];
      if (typeof begin !== 'number' || typeof end !== 'number' || begin < 0 || end < begin || end > dataBytes) {
        throw new SafetensorError(`Error while deserializing header: InvalidOffset(${JSON.stringify(name)})`);
      }
      tensors++;
    }
    const metadata = isObject(parsed.__metadata__) ? (parsed.__metadata__ as Record<string, string>) : null;
    const id = createHash('sha256').update(header).update(String(size)).digest('hex').slice(0, 16);
    return { tensors, metadata, id };
  } finally {
    await handle.close();
  }
}
