export class TooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`The content is larger than the limit of ${limit} bytes.`);
  }
}
