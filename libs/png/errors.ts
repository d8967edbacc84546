/** A PNG that cannot be read, with the reason in words a client can act on. */
export class PngDecodeError extends Error {
  override name = 'PngDecodeError';
}
