import type { Account } from '#libs/db';
import { RouterCreditsService } from './router-credits.service.js';

const account = (creditBalance: bigint, id = 'ws-1') => ({ id, creditBalance }) as Account;

describe('RouterCreditsService: the balance a replica lets its calls spend', () => {
  it('lowers the cached balance by the calls in flight, and gives back what a call did not charge', () => {
    const credits = new RouterCreditsService();
    const read = account(100n);
    const first = credits.hold('ws-1', 30);
    const second = credits.hold('ws-1', 20);
    credits.hold('ws-2', 50);
    expect(credits.available(read)).toBe(50n);
    second(false);
    expect(credits.available(read)).toBe(70n);
    // Settling twice changes nothing.
    second(false);
    first(true);
    first(false);
    expect(credits.available(read)).toBe(70n);
    expect(credits.available(account(100n, 'ws-2'))).toBe(50n);
  });

  it('keeps a written charge until a read that began after it, which holds it in its balance', async () => {
    const credits = new RouterCreditsService();
    const charged = credits.hold('ws-1', 30);
    const inFlight = credits.hold('ws-1', 5);
    const readBefore = Date.now();
    await new Promise((r) => setTimeout(r, 5));
    charged(true);
    // A read that began before the charge was written may not contain it: still held.
    const older = account(100n);
    credits.observed(older, readBefore);
    expect(credits.available(older)).toBe(65n);
    // A read that began after it contains it: only the call in flight is held now.
    await new Promise((r) => setTimeout(r, 5));
    const newer = account(70n);
    credits.observed(newer, Date.now());
    expect(credits.available(newer)).toBe(65n);
    inFlight(true);
    expect(credits.available(newer)).toBe(65n);
    credits.observed(account(65n), Date.now() + 1);
    expect(credits.available(account(65n))).toBe(65n);
  });

  it('costs nothing for a free model', () => {
    const credits = new RouterCreditsService();
    credits.hold('ws-1', 0)(true);
    expect(credits.available(account(0n))).toBe(0n);
  });
});
