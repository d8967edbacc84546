import jpeg from 'jpeg-js';
import { decodePng, encodePng, ImageDecodeError, isPng, MAX_PIXELS, type RgbaImage } from './png.js';

export { ImageDecodeError };

function isJpeg(bytes: Uint8Array): boolean {
  return bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff;
}

/** PNG or JPEG bytes as RGBA; other formats are refused with a clear reason. */
export function decodeImage(bytes: Uint8Array): RgbaImage {
  if (isPng(bytes)) return decodePng(bytes);
  if (isJpeg(bytes)) {
    try {
      const decoded = jpeg.decode(bytes, { useTArray: true, formatAsRGBA: true, maxResolutionInMP: MAX_PIXELS / 1e6, maxMemoryUsageInMB: 512 });
      return { width: decoded.width, height: decoded.height, rgba: decoded.data, text: [] };
    } catch (err) {
      throw new ImageDecodeError(`cannot decode the JPEG image: ${(err as Error).message}`);
    }
  }
  throw new ImageDecodeError('only PNG and JPEG images are supported');
}

/**
 * What the engine does for `POST /upload/mask`: the original, converted to RGBA, takes the mask's
 * alpha channel (a mask without alpha is fully opaque), and is saved as PNG keeping the
 * original's text metadata.
 */
export function applyMaskAlpha(original: Uint8Array, mask: Uint8Array): Buffer {
  const base = decodeImage(original);
  const alpha = decodeImage(mask);
  if (base.width !== alpha.width || base.height !== alpha.height) {
    throw new ImageDecodeError(`the mask is ${alpha.width}x${alpha.height} but the original image is ${base.width}x${base.height}`);
  }
  const out = new Uint8Array(base.rgba);
  for (let i = 3; i < out.length; i += 4) out[i] = alpha.rgba[i]!;
  return encodePng({ width: base.width, height: base.height, rgba: out, text: base.text });
}
