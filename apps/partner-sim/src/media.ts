import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';

// Result media the simulated providers hand out by URL. The bytes are derived from the media's id
// (the same id always gives the same bytes), start with the magic of their format, and are
// streamed in chunks, so a 5 MB video costs no 5 MB buffer. URLs expire as the provider's do.

export interface Media {
  id: string;
  contentType: string;
  size: number;
  /** Epoch ms after which the URL answers as an expired one. */
  expiresAt: number;
  /** Served only with this header and value (Google's file URIs need the API key). */
  requires?: { header: string; value: string };
  /** Steered to fail: the URL answers 404. */
  broken: boolean;
}

const MAGIC: Record<string, Buffer> = {
  'image/png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  'image/jpeg': Buffer.from([0xff, 0xd8, 0xff, 0xe0]),
  'image/webp': Buffer.from('RIFF\0\0\0\0WEBP', 'latin1'),
  'video/mp4': Buffer.from([0, 0, 0, 0x18, 0x66, 0x74, 0x79, 0x70, 0x69, 0x73, 0x6f, 0x6d]),
  'audio/mpeg': Buffer.from([0xff, 0xfb, 0x90, 0x64]),
};

const CHUNK = 64 * 1024;
const PATTERN = 64 * 1024;
const patterns = new WeakMap<object, Buffer>();

/** 64 KiB of xorshift output seeded by the media's id; the media's bytes repeat it. */
function patternOf(media: Pick<Media, 'id'>): Buffer {
  let pattern = patterns.get(media);
  if (pattern) return pattern;
  pattern = Buffer.allocUnsafe(PATTERN);
  let x = 2166136261;
  for (const ch of media.id) x = Math.imul(x ^ ch.charCodeAt(0), 16777619) >>> 0;
  for (let i = 0; i < PATTERN; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    pattern.writeUInt32LE(x >>> 0, i);
  }
  patterns.set(media, pattern);
  return pattern;
}

/** `length` bytes of the media from `offset`: the magic of its format, then its repeated pattern. */
export function mediaBytes(media: Pick<Media, 'id' | 'contentType'>, offset: number, length: number): Buffer {
  const magic = MAGIC[media.contentType] ?? Buffer.alloc(0);
  const pattern = patternOf(media);
  const out = Buffer.allocUnsafe(length);
  let written = 0;
  while (written < length) {
    const at = (offset + written) % PATTERN;
    written += pattern.copy(out, written, at, Math.min(PATTERN, at + length - written));
  }
  for (let i = offset; i < magic.length && i - offset < length; i++) out[i - offset] = magic[i]!;
  return out;
}

export class MediaShelf {
  private readonly items = new Map<string, Media>();

  add(contentType: string, size: number, ttlMs: number, options: { requires?: Media['requires']; broken?: boolean } = {}): Media {
    const media: Media = { id: randomUUID(), contentType, size, expiresAt: Date.now() + ttlMs, requires: options.requires, broken: options.broken ?? false };
    this.items.set(media.id, media);
    return media;
  }

  get(id: string): Media | undefined {
    return this.items.get(id);
  }

  /** The whole bytes of a media item (tests compare them with what the router re-hosted). */
  bytes(id: string): Buffer {
    const media = this.items.get(id);
    if (!media) throw new Error(`no media ${id}`);
    return mediaBytes(media, 0, media.size);
  }

  /** Streams the media, honouring the response's back-pressure. */
  send(res: ServerResponse, media: Media): void {
    res.writeHead(200, { 'content-type': media.contentType, 'content-length': media.size });
    let offset = 0;
    const pump = (): void => {
      while (offset < media.size) {
        const n = Math.min(CHUNK, media.size - offset);
        const more = res.write(mediaBytes(media, offset, n));
        offset += n;
        if (!more) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  }
}
