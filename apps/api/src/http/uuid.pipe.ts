import type { PipeTransform } from '@nestjs/common';
import { ApiError } from '#libs/contracts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}

/**
 * Path ids are UUIDs. Anything else names no job or asset, so it answers exactly as a missing one
 * does (the contract's 404 `not_found`), and never reaches the database.
 */
export class UuidPipe implements PipeTransform<string, string> {
  constructor(private readonly kind: 'job' | 'asset') {}

  transform(value: string): string {
    if (!isUuid(value)) throw ApiError.notFound(this.kind);
    return value.toLowerCase();
  }
}
