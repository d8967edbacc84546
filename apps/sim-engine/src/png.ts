/**
 * The engine's PNG files through #libs/png (pngjs): deterministic (same pixels and text, same
 * bytes), with the text chunks the engine writes, animated PNG, and inputs decoded to RGB, or RGBA
 * when the file has transparency.
 */
import { decodePng as decodeRgba, type RawImage } from '#libs/png';

export { encodeApng, encodePng, isPng } from '#libs/png';
export type { PngEncodeOptions, RawImage } from '#libs/png';

export interface DecodedPng extends RawImage {
  text: Array<[string, string]>;
}

/** Any standard PNG, as 8-bit RGB, or RGBA when it has alpha or a transparent colour. */
export function decodePng(buf: Buffer): DecodedPng {
  const { width, height, rgba, hasAlpha, text } = decodeRgba(buf);
  if (hasAlpha) return { width, height, channels: 4, data: rgba, text };
  const rgb = new Uint8Array(width * height * 3);
  for (let from = 0, to = 0; from < rgba.length; from += 4, to += 3) {
    rgb[to] = rgba[from]!;
    rgb[to + 1] = rgba[from + 1]!;
    rgb[to + 2] = rgba[from + 2]!;
  }
  return { width, height, channels: 3, data: rgb, text };
}
