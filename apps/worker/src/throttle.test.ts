import { jest } from '@jest/globals';
import { Throttle } from './throttle.js';

describe('Throttle', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('runs the first call at once, then the latest one per interval, the last never lost', () => {
    const ran: number[] = [];
    const t = new Throttle(1000);
    t.run(() => ran.push(1));
    expect(ran).toEqual([1]);
    t.run(() => ran.push(2));
    t.run(() => ran.push(3));
    jest.advanceTimersByTime(999);
    expect(ran).toEqual([1]);
    jest.advanceTimersByTime(1);
    expect(ran).toEqual([1, 3]);
  });

  it('fromStart: nothing runs in the first interval, and the latest call runs when it ends', () => {
    const ran: number[] = [];
    const t = new Throttle(1000, { fromStart: true });
    jest.advanceTimersByTime(400);
    t.run(() => ran.push(1));
    t.run(() => ran.push(2));
    expect(ran).toEqual([]);
    jest.advanceTimersByTime(599);
    expect(ran).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(ran).toEqual([2]);
  });

  it('fromStart: a call after the first interval runs at once', () => {
    const ran: number[] = [];
    const t = new Throttle(1000, { fromStart: true });
    jest.advanceTimersByTime(1500);
    t.run(() => ran.push(1));
    expect(ran).toEqual([1]);
  });

  it('cancel drops the waiting call; flush runs it now', () => {
    const ran: number[] = [];
    const t = new Throttle(1000, { fromStart: true });
    t.run(() => ran.push(1));
    t.cancel();
    jest.advanceTimersByTime(2000);
    expect(ran).toEqual([]);
    t.run(() => ran.push(2));
    t.run(() => ran.push(3));
    expect(ran).toEqual([2]);
    t.flush();
    expect(ran).toEqual([2, 3]);
    jest.advanceTimersByTime(2000);
    expect(ran).toEqual([2, 3]);
  });
});
