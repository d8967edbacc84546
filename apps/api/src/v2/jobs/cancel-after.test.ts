import { ApiError, CancelAfterSchema } from '#libs/contracts';
import { jobDeadlines } from '../../jobs/job-deadlines.js';
import { parseV2Input } from '../parse-input.js';

// As the submission handler reads the header.
const parseCancelAfter = (header: unknown) => parseV2Input(CancelAfterSchema, header, { header: 'Cancel-After' });

describe('Cancel-After', () => {
  it.each([
    ['90s', 90],
    ['5m', 300],
    ['1h30m', 5400],
    ['2h', 7200],
    ['1h0m5s', 3605],
    ['300', 300],
    [' 45s ', 45],
    ['1', 1],
    [['90s'], 90],
  ] as const)('reads %j as %d seconds', (header, seconds) => {
    expect(parseCancelAfter(header)).toBe(seconds);
  });

  it('is absent without the header', () => {
    expect(parseCancelAfter(undefined)).toBeUndefined();
  });

  it.each(['', '0', '0s', '-5', '1.5h', '5 m', '30m1h', '5d', 'soon', '1h1h', 's', '90s,5m', '9'.repeat(12), ['90s', '5m'], 7])('refuses %j with 400 invalid_request', (header) => {
    let thrown: unknown;
    try {
      parseCancelAfter(header);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect((thrown as ApiError).status).toBe(400);
    expect((thrown as ApiError).code).toBe('invalid_request');
    expect((thrown as ApiError).message).toBe('Cancel-After must be a duration such as 90s, 5m or 1h30m, or a number of seconds, of at least 1 second.');
    expect((thrown as ApiError).details).toEqual({ header: 'Cancel-After' });
  });

  it('bounds the wait in the queue by the job deadline when that comes first', () => {
    const now = Date.parse('2026-11-30T10:00:00Z');
    expect(jobDeadlines(now, 3600, null)).toEqual({ queueDeadlineAt: new Date(now + 3600_000), deadlineAt: null });
    expect(jobDeadlines(now, 3600, 90)).toEqual({ queueDeadlineAt: new Date(now + 90_000), deadlineAt: new Date(now + 90_000) });
    expect(jobDeadlines(now, 60, 90)).toEqual({ queueDeadlineAt: new Date(now + 60_000), deadlineAt: new Date(now + 90_000) });
  });
});
