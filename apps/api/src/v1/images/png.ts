// v1's mask upload reads and writes PNG through #libs/png (pngjs), in the shape the mask code works
// in: 8-bit RGBA with the file's text metadata.
import { decodePng as decodeRgba, encodePng as encodeRgba, PngDecodeError } from '#libs/png';

export { isPng, MAX_PIXELS, pngChunk } from '#libs/png';
export { PngDecodeError as ImageDecodeError };

export interface RgbaImage {
  width: number;
  height: number;
  /** width * height * 4 bytes, row by row. */
  rgba: Uint8Array;
  /** tEXt / iTXt / zTXt metadata, in file order. */
  text: Array<[string, string]>;
}

/** Any standard PNG as 8-bit RGBA; refuses (ImageDecodeError) what is not one or is over MAX_PIXELS. */
export function decodePng(input: Uint8Array): RgbaImage {
  const { width, height, rgba, text } = decodeRgba(input);
  return { width, height, rgba, text };
}

/** 8-bit RGBA PNG with the given text metadata (tEXt, or iTXt for text that is not Latin-1). */
export function encodePng(image: Omit<RgbaImage, 'text'> & { text?: Array<[string, string]> }, compressLevel = 4): Buffer {
  return encodeRgba({ width: image.width, height: image.height, channels: 4, data: image.rgba }, { compressLevel, text: image.text });
}
