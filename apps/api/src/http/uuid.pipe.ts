import { type PipeTransform, Injectable } from '@nestjs/common';
import { ApiError } from '#libs/contracts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}

/** Path ids must be UUIDs: anything else is a clear 400, never a database error. */
@Injectable()
export class UuidPipe implements PipeTransform<string, string> {
  transform(value: string): string {
    if (!isUuid(value)) throw ApiError.invalid('The id in the path must be a UUID.', { id: String(value).slice(0, 100) });
    return value.toLowerCase();
  }
}
