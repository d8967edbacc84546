/**
 * Binary WebSocket frames of the engine protocol. All integers are 32-bit
 * big-endian. The first word is the event type:
 *  1 PREVIEW_IMAGE: word image format (1 JPEG, 2 PNG), then the image bytes
 *  3 TEXT: word node-id length, node id (UTF-8), then UTF-8 text
 *  4 PREVIEW_IMAGE_WITH_METADATA: word metadata length, JSON metadata, image bytes
 * Type 2 (unencoded preview) never travels on the wire.
 */
import { pythonJsonDumps } from './python-json.js';

export const BinaryEventType = {
  PREVIEW_IMAGE: 1,
  UNENCODED_PREVIEW_IMAGE: 2,
  TEXT: 3,
  PREVIEW_IMAGE_WITH_METADATA: 4,
} as const;

export const PreviewImageFormat = { JPEG: 1, PNG: 2 } as const;

export interface PreviewMetadata {
  node_id: string;
  prompt_id: string;
  display_node_id: string;
  parent_node_id: string | null;
  real_node_id: string;
  image_type: 'image/png' | 'image/jpeg' | string;
  [key: string]: unknown;
}

export interface PreviewImageFrame {
  kind: 'preview_image';
  eventType: 1;
  /** 1 = JPEG, 2 = PNG (the engine's numbering) */
  imageFormat: number;
  mimeType: string;
  image: Buffer;
}

export interface TextFrame {
  kind: 'text';
  eventType: 3;
  nodeId: string;
  text: string;
}

export interface PreviewImageWithMetadataFrame {
  kind: 'preview_image_with_metadata';
  eventType: 4;
  metadata: PreviewMetadata;
  mimeType: string;
  image: Buffer;
}

export interface UnknownFrame {
  kind: 'unknown';
  eventType: number;
  payload: Buffer;
}

export type BinaryFrame = PreviewImageFrame | TextFrame | PreviewImageWithMetadataFrame | UnknownFrame;

export class FrameDecodeError extends Error {
  override name = 'FrameDecodeError';
}

function imageFormatToMime(format: number): string {
  if (format === PreviewImageFormat.PNG) return 'image/png';
  if (format === PreviewImageFormat.JPEG) return 'image/jpeg';
  return 'application/octet-stream';
}

export function mimeToImageFormat(mime: string): number {
  return mime === 'image/png' ? PreviewImageFormat.PNG : PreviewImageFormat.JPEG;
}

function word(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0, 0);
  return b;
}

export function encodePreviewImageFrame(image: Buffer, imageFormat: number): Buffer {
  return Buffer.concat([word(BinaryEventType.PREVIEW_IMAGE), word(imageFormat), image]);
}

export function encodeTextFrame(nodeId: string, text: string): Buffer {
  const id = Buffer.from(nodeId, 'utf8');
  return Buffer.concat([word(BinaryEventType.TEXT), word(id.length), id, Buffer.from(text, 'utf8')]);
}

/** Metadata is written with Python's JSON formatting, as the engine does. */
export function encodePreviewImageWithMetadataFrame(image: Buffer, metadata: PreviewMetadata): Buffer {
  const meta = Buffer.from(pythonJsonDumps(metadata), 'utf8');
  return Buffer.concat([word(BinaryEventType.PREVIEW_IMAGE_WITH_METADATA), word(meta.length), meta, image]);
}

function toBuffer(data: Buffer | ArrayBuffer | Uint8Array | Buffer[]): Buffer {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (Buffer.isBuffer(data)) return data;
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

export function decodeBinaryFrame(raw: Buffer | ArrayBuffer | Uint8Array | Buffer[]): BinaryFrame {
  const buf = toBuffer(raw);
  if (buf.length < 4) throw new FrameDecodeError(`binary frame too short (${buf.length} bytes)`);
  const eventType = buf.readUInt32BE(0);
  switch (eventType) {
    case BinaryEventType.PREVIEW_IMAGE: {
      if (buf.length < 8) throw new FrameDecodeError('preview frame without image format');
      const imageFormat = buf.readUInt32BE(4);
      return { kind: 'preview_image', eventType: 1, imageFormat, mimeType: imageFormatToMime(imageFormat), image: buf.subarray(8) };
    }
    case BinaryEventType.TEXT: {
      if (buf.length < 8) throw new FrameDecodeError('text frame without node id length');
      const idLen = buf.readUInt32BE(4);
      if (8 + idLen > buf.length) throw new FrameDecodeError('text frame node id exceeds frame');
      return {
        kind: 'text',
        eventType: 3,
        nodeId: buf.subarray(8, 8 + idLen).toString('utf8'),
        text: buf.subarray(8 + idLen).toString('utf8'),
      };
    }
    case BinaryEventType.PREVIEW_IMAGE_WITH_METADATA: {
      if (buf.length < 8) throw new FrameDecodeError('preview frame without metadata length');
      const metaLen = buf.readUInt32BE(4);
      if (8 + metaLen > buf.length) throw new FrameDecodeError('preview metadata exceeds frame');
      let metadata: PreviewMetadata;
      try {
        metadata = JSON.parse(buf.subarray(8, 8 + metaLen).toString('utf8')) as PreviewMetadata;
      } catch (err) {
        throw new FrameDecodeError(`preview metadata is not JSON: ${(err as Error).message}`);
      }
      return {
        kind: 'preview_image_with_metadata',
        eventType: 4,
        metadata,
        mimeType: typeof metadata.image_type === 'string' ? metadata.image_type : 'application/octet-stream',
        image: buf.subarray(8 + metaLen),
      };
    }
    default:
      return { kind: 'unknown', eventType, payload: buf.subarray(4) };
  }
}
