import type { PipeTransform } from '@nestjs/common';
import { ApiError, isUuid } from '#libs/contracts';

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
