import { createWriteStream } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';

/** The header of a safetensors file holding one float32 tensor of `dataBytes` bytes (a multiple of 4). */
function header(dataBytes: number, metadata: Record<string, string>): Buffer {
  const json = Buffer.from(JSON.stringify({ __metadata__: metadata, weight: { dtype: 'F32', shape: [dataBytes / 4], data_offsets: [0, dataBytes] } }));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([length, json]);
}

/** A small, valid safetensors file with random weights: different bytes every call. */
export function safetensors(dataBytes = 1024, metadata: Record<string, string> = { format: 'pt' }): Buffer {
  return Buffer.concat([header(dataBytes, metadata), randomBytes(dataBytes)]);
}

/** Writes a valid safetensors file of about `totalBytes` to `file`, streamed in 1 MiB chunks (never held whole). */
export async function writeLargeSafetensors(file: string, totalBytes: number, metadata: Record<string, string> = { format: 'pt' }): Promise<void> {
  const dataBytes = Math.floor(totalBytes / 4) * 4;
  const out = createWriteStream(file);
  out.write(header(dataBytes, metadata));
  const chunk = 1 << 20;
  for (let written = 0; written < dataBytes; written += chunk) {
    if (!out.write(randomBytes(Math.min(chunk, dataBytes - written)))) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}
