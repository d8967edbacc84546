export { decodePng, encodePng, MAX_PIXELS } from './codec.js';
export type { DecodedPng, PngEncodeOptions, RawImage } from './codec.js';
export { encodeApng } from './apng.js';
export { isPng, pngChunk, readChunks, readTextChunk, textChunk, PNG_SIGNATURE } from './chunks.js';
export type { Chunk } from './chunks.js';
export { PngDecodeError } from './errors.js';
