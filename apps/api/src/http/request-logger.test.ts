import { jest } from '@jest/globals';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { loggerOptions } from '#libs/logging';
import { requestLogger } from './request-logger.js';

function capture(level = 'info'): { root: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  // The options every process uses, redaction included.
  return { root: pino(loggerOptions({ level }), sink), lines };
}

describe('requestLogger', () => {
  it('makes no child until the request logs, then writes every line with its bindings', () => {
    const { root, lines } = capture();
    const child = jest.spyOn(root, 'child');
    let made = 0;
    const log = requestLogger(root, () => (made++, { request_id: 'r1', job_id: 'j1' }), {});
    expect(log.level).toBe('info');
    expect(log.isLevelEnabled('debug')).toBe(false);
    expect(child).not.toHaveBeenCalled();
    log.warn({ reason: 'x' }, 'first');
    log.error('second');
    log.debug('below the level');
    expect(made).toBe(1);
    expect(child).toHaveBeenCalledTimes(1);
    expect(lines.map((l) => [l.msg, l.request_id, l.job_id])).toEqual([
      ['first', 'r1', 'j1'],
      ['second', 'r1', 'j1'],
    ]);
    expect(lines[0]!.reason).toBe('x');
  });

  it('keeps the redaction rules and the children of the request logger', () => {
    const { root, lines } = capture();
    const log = requestLogger(root, () => ({ request_id: 'r2' }), {});
    log.child({ component: 'c' }).info({ headers: { authorization: 'Bearer secret' } }, 'nested');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: 'nested', request_id: 'r2', component: 'c' });
    expect(JSON.stringify(lines[0])).not.toContain('secret');
  });

  it('gives each request its own bindings', () => {
    const { root, lines } = capture();
    const a = requestLogger(root, () => ({ request_id: 'a' }), {});
    const b = requestLogger(root, () => ({ request_id: 'b' }), {});
    b.info('from b');
    a.info('from a');
    expect(lines.map((l) => [l.msg, l.request_id])).toEqual([
      ['from b', 'b'],
      ['from a', 'a'],
    ]);
  });

  it('makes a real child at once for a route with its own options', () => {
    const { root, lines } = capture();
    const log = requestLogger(root, () => ({ request_id: 'r3' }), { level: 'debug' });
    expect(log.level).toBe('debug');
    log.debug('traced');
    expect(lines).toMatchObject([{ msg: 'traced', request_id: 'r3' }]);
  });
});
