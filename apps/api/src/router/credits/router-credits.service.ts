import { Injectable } from '@nestjs/common';
import type { Account } from '#libs/db';

// The credit check reads the workspace's balance as this replica caches it (see router-auth), and
// charges reach the database in batches after the answer. So that this replica's calls see each
// other's charges at once, a call's price is held here from its dispatch until its charge is
// written (or given back when the call ends uncharged), and every balance read is lowered by the
// holds it cannot contain yet. Charges made on other replicas arrive with a reload: a workspace
// can overrun its balance by what it spends on the other replicas within one freshness period of
// the cache and the batch delay.

/** Settle once: `true` when the database has the charge, `false` when it was not made (the credits come back). */
export type HeldCharge = (written: boolean) => void;

interface Hold {
  cents: bigint;
  /** When the charge was known written (epoch ms), or null while it is not. */
  writtenAt: number | null;
}

/** A workspace's holds and their sum: a busy workspace has thousands (two seconds of charges), and every call reads the sum. */
interface Holds {
  list: Hold[];
  cents: bigint;
}

const NOTHING_HELD: HeldCharge = () => undefined;

@Injectable()
export class RouterCreditsService {
  // Per workspace, the holds of calls in flight and of charges written since the last read.
  private readonly holds = new Map<string, Holds>();

  /**
   * Holds a call's price against the workspace's balance until the call's charge settles. A hold
   * is part of every balance this replica reads until a database read that began after the
   * charge was written.
   */
  hold(accountId: string, cents: number): HeldCharge {
    if (cents <= 0) return NOTHING_HELD;
    const hold: Hold = { cents: BigInt(cents), writtenAt: null };
    const held = this.holds.get(accountId);
    if (held) {
      held.list.push(hold);
      held.cents += hold.cents;
    } else {
      this.holds.set(accountId, { list: [hold], cents: hold.cents });
    }
    let settled = false;
    return (written) => {
      if (settled) return;
      settled = true;
      if (written) hold.writtenAt = Date.now();
      else this.remove(accountId, hold);
    };
  }

  /**
   * Called with each account the cache reads from the database, and the time that read began:
   * charges written before it are in its balance (and in every later read's), so their holds go.
   * So every hold still kept is one that no read of the account can contain yet.
   */
  observed(account: Account, readStartedAt: number): void {
    const held = this.holds.get(account.id);
    if (!held) return;
    held.list = held.list.filter((h) => {
      const contained = h.writtenAt !== null && h.writtenAt < readStartedAt;
      if (contained) held.cents -= h.cents;
      return !contained;
    });
    if (held.list.length === 0) this.holds.delete(account.id);
  }

  /**
   * The balance the workspace can still spend as this replica knows it: the cached balance less
   * the holds that read cannot include (charges not written yet, and those written while or after
   * it ran; a charge written during the read may be counted twice until the next one, erring low:
   * that only delays a call, erring high would let a workspace run past zero).
   */
  available(account: Account): bigint {
    return account.creditBalance - (this.holds.get(account.id)?.cents ?? 0n);
  }

  /** One settled hold removed in place: the list holds every call in flight, settled one by one. */
  private remove(accountId: string, hold: Hold): void {
    const held = this.holds.get(accountId);
    const at = held?.list.indexOf(hold) ?? -1;
    if (!held || at < 0) return;
    held.list.splice(at, 1);
    held.cents -= hold.cents;
    if (held.list.length === 0) this.holds.delete(accountId);
  }
}
