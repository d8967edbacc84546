import { ApiError } from '#libs/contracts';
import { toErrorShape } from './error-body.js';

describe('toErrorShape', () => {
  it('keeps an ApiError as it is', () => {
    const shape = toErrorShape(new ApiError('queue_full', 'Too many queued jobs.', undefined, { 'retry-after': '5' }));
    expect(shape).toMatchObject({ status: 429, code: 'queue_full', headers: { 'retry-after': '5' }, unexpected: false });
  });

  it('turns an unexpected exception into 500 upstream_error with a generic message', () => {
    const shape = toErrorShape(new TypeError('cannot read properties of undefined (secret detail)'));
    expect(shape.status).toBe(500);
    expect(shape.code).toBe('upstream_error');
    expect(shape.message).not.toMatch(/secret|undefined/);
    expect(shape.unexpected).toBe(true);
  });

  it('turns a lost database or Redis connection, or a silent or failing S3 store, into a retryable 503', () => {
    const s3Timeout = Object.assign(new Error('a request has exceeded the configured 3000 ms requestTimeout.'), { name: 'TimeoutError' });
    const s3Failing = Object.assign(new Error('We encountered an internal error.'), { name: 'InternalError', $metadata: { httpStatusCode: 503 } });
    // A connection PostgreSQL drops mid-session, as pg and Prisma word it, and a server restarting.
    const dropped = [
      new Error('Connection terminated unexpectedly'),
      new Error('Server has closed the connection.'),
      new Error('Client has encountered a connection error and is not queryable'),
      new Error('timeout exceeded when trying to connect'),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
    ];
    for (const err of [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }), new Error('Connection is closed.'), s3Timeout, s3Failing, ...dropped]) {
      const shape = toErrorShape(err);
      expect(shape.status).toBe(503);
      expect(shape.code).toBe('service_unavailable');
      expect(shape.headers).toEqual({ 'retry-after': '1' });
    }
  });

  it('maps framework 4xx errors onto contract codes', () => {
    expect(toErrorShape({ statusCode: 413, message: 'Request body is too large' }).code).toBe('payload_too_large');
    expect(toErrorShape({ statusCode: 415 }).code).toBe('unsupported_media_type');
    expect(toErrorShape({ statusCode: 400, name: 'SyntaxError', message: 'Unexpected token' }).code).toBe('invalid_json');
    expect(toErrorShape({ getStatus: () => 404, message: 'Cannot GET /x' }).code).toBe('not_found');
  });
});
