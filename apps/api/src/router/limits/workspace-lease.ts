/** A workspace's limits, as the lease script takes them. */
export interface WorkspaceLimits {
  maxConcurrent: number;
  spendCap: number;
  windowCalls: number;
  windowMs: number;
}

export interface WorkspaceKeys {
  inflight: string;
  slots: string;
  spend: string;
  window: string;
}

/** What a replica tells the lease script about its holding (see limits.scripts.ts). */
export interface LeaseAsk {
  usedSlots: number;
  usedCents: number;
  floorSlots: number;
  floorCents: number;
  heldWindowStart: number;
  windowReturned: number;
  wantSlots: number;
  wantCents: number;
  wantWindow: number;
}

/** What the lease script answers about the holding. */
export interface LeaseGrant {
  slots: number;
  cents: number;
  /** How much of the holding may be reserve, beyond the calls in flight. */
  reserveSlots: number;
  reserveCents: number;
  share: number;
  windowStart: number;
  windowMsLeft: number;
  /** A call of the workspace was refused lately: every reserve and unused share goes back. */
  contended: boolean;
}

// A share of the window is not used this close to its end: the end is known on this replica's
// clock only to within the time the answer took to be read.
const WINDOW_GUARD_MS = 50;
// Nor a holding this close to the end of its lease in Redis.
const LEASE_GUARD_MS = 2_000;
// Demand is what the last one to two of these periods saw.
const DEMAND_PERIOD_MS = 500;
// The reserve asked for, in recent peaks: a burst like the last, even one that starts before the
// last has ended, finds the holding ready instead of waiting for Redis.
const RESERVE_PEAKS = 2;
// A replica holding more than its calls in flight asks Redis this often whether it still may:
// once a call of the workspace is refused on slots or cents, no reserve is allowed (limits.scripts.ts).
const RESERVE_CHECK_MS = 100;

/**
 * One workspace's limits as this replica holds them. Redis counts, per replica, a holding of slots
 * and cents and a share of the window's allowance (limits.scripts.ts). While the holding covers a
 * call, the call is admitted here, at once: waiting for Redis before every dispatch made each call
 * of a burst wait for the whole burst to be read, and kept callers in step. A call the holding
 * cannot cover is decided by Redis, exactly, and the holding grows with it.
 *
 * The holding is this replica's calls in flight plus a reserve of about twice its recent peak, which
 * Redis caps at a quarter of what the workspace has free. It shrinks when demand falls and goes
 * back to Redis when idle (LimitsService's tick); a crashed replica's ends with its lease.
 */
export class WorkspaceLease {
  /** The holding Redis counts for this replica. */
  heldSlots = 0;
  heldCents = 0;
  /** What this replica's calls in flight use of it. */
  usedSlots = 0;
  usedCents = 0;
  /** How much beyond them Redis last allowed it to hold. */
  private reserveSlots = 0;
  private reserveCents = 0;
  /** Unused calls of the window's allowance, taken for the window starting at windowStart. */
  windowLeft = 0;
  windowStart = -1;
  /** Unused share of the window not yet given back to Redis. */
  private windowToReturn = 0;
  /** performance.now() values: when the window ends, and until when the holding is surely Redis's. */
  private windowEndsAt = 0;
  private validUntil = 0;
  private answeredAt = 0;
  /** Acquire scripts queued or in flight: nothing is admitted here meanwhile (see askFor). */
  asking = 0;
  /** A refresh script is in flight. */
  refreshing = false;
  /**
   * A script failed: Redis may or may not have applied it, so what it holds is not known. Nothing is
   * admitted here until a refresh sets the holding again (the holding here is never above Redis's).
   */
  private unconfirmed = false;
  // Demand in the current and the previous period: peak use and calls admitted.
  private periodStart = 0;
  private peak = { slots: [0, 0], cents: [0, 0] };
  private calls = [0, 0];

  constructor(
    readonly keys: WorkspaceKeys,
    public limits: WorkspaceLimits,
    private readonly leaseMs: number,
  ) {}

  /**
   * Sets the limits. A reserve taken under other limits is dropped here (and its window share given
   * back with the next script), so the next call that needs more asks Redis under the new ones.
   */
  setLimits(limits: WorkspaceLimits): void {
    const same = this.limits.maxConcurrent === limits.maxConcurrent && this.limits.spendCap === limits.spendCap && this.limits.windowCalls === limits.windowCalls && this.limits.windowMs === limits.windowMs;
    if (same) return;
    this.limits = limits;
    this.heldSlots = this.usedSlots;
    this.heldCents = this.usedCents;
    this.takeWindowBack();
  }

  /** Admits a call costing `cents` against the holding, if it covers it. */
  tryAdmit(cents: number, now: number): boolean {
    if (this.asking > 0 || this.unconfirmed || now >= this.validUntil || now >= this.windowEndsAt - WINDOW_GUARD_MS) return false;
    if (this.usedSlots + 1 > this.heldSlots || this.usedCents + cents > this.heldCents || this.windowLeft < 1) return false;
    this.windowLeft -= 1;
    this.use(cents, now);
    return true;
  }

  release(cents: number): void {
    this.usedSlots = Math.max(0, this.usedSlots - 1);
    this.usedCents = Math.max(0, this.usedCents - cents);
  }

  /**
   * The ask of an acquire script for `costs`. Nothing is admitted here until its answer: the holding
   * it sets counts what is in flight now and what it admits, and no more.
   */
  askFor(costs: number[], now: number): LeaseAsk {
    this.rollPeriod(now);
    const cents = costs.reduce((sum, c) => sum + c, 0);
    return this.ask({
      windowReturned: this.takeWindowReturn(this.windowLeft),
      wantSlots: RESERVE_PEAKS * Math.max(this.recentPeak('slots'), this.usedSlots + costs.length),
      wantCents: RESERVE_PEAKS * Math.max(this.recentPeak('cents'), this.usedCents + cents),
      wantWindow: Math.max(this.recentCalls(), costs.length),
    });
  }

  /** Takes the answer of an acquire script: the calls it admitted are in flight here now. */
  granted(grant: LeaseGrant, admitted: number[], now: number): void {
    this.unconfirmed = false;
    this.apply(grant, now);
    for (const cents of admitted) this.use(cents, now);
  }

  /**
   * The ask of a refresh, when the holding should change: renewed before its lease ends, shrunk
   * when calls ended or demand fell, given back when idle; it grows as calls it cannot cover are
   * decided by Redis (askFor). Lowers the holding here before asking, so that what is admitted
   * meanwhile stays within what Redis will hold.
   */
  refreshAsk(now: number): LeaseAsk | null {
    if (this.asking > 0 || this.refreshing) return null;
    this.rollPeriod(now);
    const wantSlots = RESERVE_PEAKS * this.recentPeak('slots');
    const wantCents = RESERVE_PEAKS * this.recentPeak('cents');
    const calls = this.recentCalls();
    const idle = calls === 0 && this.usedSlots === 0;
    if (idle && this.empty()) return null;
    const windowOpen = now < this.windowEndsAt - WINDOW_GUARD_MS;
    const ask = this.ask({ floorSlots: this.heldSlots, floorCents: this.heldCents, windowReturned: this.takeWindowReturn(0) });
    const renew = (this.heldSlots > 0 || this.heldCents > 0) && now >= this.validUntil - this.leaseMs / 2;
    const spare = this.heldSlots > this.usedSlots || this.heldCents > this.usedCents || this.windowLeft > 0;
    let change = this.unconfirmed || renew || ask.windowReturned > 0 || (spare && now - this.answeredAt >= RESERVE_CHECK_MS);
    if (idle) {
      ask.floorSlots = ask.floorCents = 0;
      ask.windowReturned += this.takeWindowReturn(this.windowLeft);
      change = true;
    } else {
      ask.wantSlots = wantSlots;
      ask.wantCents = wantCents;
      if (this.overReserve()) {
        ask.floorSlots = Math.max(this.usedSlots, Math.min(this.heldSlots, this.usedSlots + this.reserveSlots));
        ask.floorCents = Math.max(this.usedCents, Math.min(this.heldCents, this.usedCents + this.reserveCents));
        change = true;
      }
      // Demand fell: the reserve Redis allows follows it down (and the holding, once over it).
      if (wantSlots < this.reserveSlots / 2 || wantCents < this.reserveCents / 2) change = true;
      if (this.windowLeft < calls / 2 && (windowOpen || this.windowLeft === 0)) {
        ask.wantWindow = calls;
        change = true;
      }
    }
    if (!change) return null;
    this.heldSlots = ask.floorSlots;
    this.heldCents = ask.floorCents;
    this.refreshing = true;
    return ask;
  }

  /** Takes the answer of a refresh. */
  refreshed(grant: LeaseGrant, now: number): void {
    this.refreshing = false;
    this.unconfirmed = false;
    this.apply(grant, now);
  }

  /**
   * Holds more than its calls in flight and the reserve Redis allowed (calls ended), or has a share
   * of the window to give back: it goes back now, so that the workspace's other replicas find it.
   */
  overReserve(): boolean {
    return this.heldSlots - this.usedSlots > this.reserveSlots || this.heldCents - this.usedCents > this.reserveCents || this.windowToReturn > 0;
  }

  /** A script Redis did not answer (see unconfirmed); the next refresh sets the holding again. */
  failed(): void {
    this.unconfirmed = true;
  }

  /** Nothing held, nothing in flight, nothing under way: the replica can forget the workspace. */
  empty(): boolean {
    return this.heldSlots === 0 && this.heldCents === 0 && this.windowLeft === 0 && this.windowToReturn === 0 && this.usedSlots === 0 && this.asking === 0 && !this.refreshing && !this.unconfirmed;
  }

  /** What a stopping replica gives back: everything not in flight. */
  releaseAsk(): LeaseAsk {
    const ask = this.ask({ windowReturned: this.takeWindowReturn(this.windowLeft) });
    this.heldSlots = this.usedSlots;
    this.heldCents = this.usedCents;
    return ask;
  }

  /** An ask with this replica's calls in flight and its window; no floor and nothing wanted unless given. */
  private ask(given: Partial<LeaseAsk>): LeaseAsk {
    return {
      usedSlots: this.usedSlots,
      usedCents: this.usedCents,
      floorSlots: 0,
      floorCents: 0,
      heldWindowStart: this.windowStart,
      windowReturned: 0,
      wantSlots: 0,
      wantCents: 0,
      wantWindow: 0,
      ...given,
    };
  }

  /** Sets the unused share aside, to be given back with the next script. */
  private takeWindowBack(): void {
    this.windowToReturn += this.windowLeft;
    this.windowLeft = 0;
  }

  /** Moves `fromLeft` of the unused share, and what was set aside to give back, into an ask. */
  private takeWindowReturn(fromLeft: number): number {
    const returned = this.windowToReturn + fromLeft;
    this.windowToReturn = 0;
    this.windowLeft -= fromLeft;
    return returned;
  }

  private apply(grant: LeaseGrant, now: number): void {
    this.heldSlots = grant.slots;
    this.heldCents = grant.cents;
    this.reserveSlots = grant.reserveSlots;
    this.reserveCents = grant.reserveCents;
    // Shares of one window add up (a refresh's answer can arrive while an acquire is asked);
    // a new window's replace the old, whose allowance is gone, given back or not.
    if (grant.windowStart !== this.windowStart) this.windowToReturn = 0;
    this.windowLeft = grant.windowStart === this.windowStart ? this.windowLeft + grant.share : grant.share;
    this.windowStart = grant.windowStart;
    if (grant.contended) this.takeWindowBack();
    this.windowEndsAt = now + grant.windowMsLeft;
    this.answeredAt = now;
    this.validUntil = grant.slots > 0 || grant.cents > 0 ? now + this.leaseMs - LEASE_GUARD_MS : 0;
  }

  private use(cents: number, now: number): void {
    this.rollPeriod(now);
    this.usedSlots += 1;
    this.usedCents += cents;
    this.calls[0]! += 1;
    this.peak.slots[0] = Math.max(this.peak.slots[0]!, this.usedSlots);
    this.peak.cents[0] = Math.max(this.peak.cents[0]!, this.usedCents);
  }

  private rollPeriod(now: number): void {
    if (now - this.periodStart < DEMAND_PERIOD_MS) return;
    const skipped = now - this.periodStart >= 2 * DEMAND_PERIOD_MS;
    this.periodStart = now;
    this.calls = [0, skipped ? 0 : this.calls[0]!];
    this.peak.slots = [this.usedSlots, skipped ? this.usedSlots : this.peak.slots[0]!];
    this.peak.cents = [this.usedCents, skipped ? this.usedCents : this.peak.cents[0]!];
  }

  private recentPeak(kind: 'slots' | 'cents'): number {
    return Math.max(this.peak[kind][0]!, this.peak[kind][1]!);
  }

  private recentCalls(): number {
    return this.calls[0]! + this.calls[1]!;
  }
}
