import { Prisma, type CreditLedgerEntry, type Db } from '#libs/db';

// The one owner of the credit ledger (`credit_ledger`) and of the balance it explains
// (`accounts.credit_balance`): every entry is written here, and the balance moves with it in the
// same statement or transaction. Charges are made inside other statements (a job's ending, a
// router call's completion) so that the charge and what it pays for commit together; for those
// this gives SQL fragments, for the rest statements that take a transaction client.

/** Why credits moved; the ledger's unique (reason, ref) makes each charge happen once. */
export const CHARGE_REASONS = { job: 'job', routerCall: 'router_call', grant: 'grant' } as const;

type Client = Db | Prisma.TransactionClient;

/**
 * Two CTEs, `charge` and `balance`, that charge what `entries` selects: rows of
 * (account_id uuid, amount bigint (negative for a charge), reason text, ref text). An entry whose
 * (reason, ref) is already in the ledger is skipped (never charged twice); the accounts' balances
 * move by the sum of the entries written. Put after the CTE that `entries` reads from.
 */
export function chargeCtes(entries: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`charge AS (
      INSERT INTO credit_ledger (account_id, amount, reason, ref)
      ${entries}
      ON CONFLICT (reason, ref) DO NOTHING
      RETURNING account_id, amount
    ), balance AS (
      UPDATE accounts a SET credit_balance = a.credit_balance + s.total
      FROM (SELECT account_id, sum(amount)::bigint AS total FROM charge GROUP BY account_id) s
      WHERE a.id = s.account_id
      RETURNING a.id
    )`;
}

/** Writes a ledger entry for credits an account was given at its creation (its balance already holds them). */
export async function recordOpeningCredits(tx: Client, accountId: string, amount: bigint): Promise<void> {
  await tx.creditLedgerEntry.create({ data: { accountId, amount, reason: CHARGE_REASONS.grant } });
}

/** Adds (or, negative, takes) credits with their ledger entry; the new balance. Use inside a transaction. */
export async function moveCredits(tx: Prisma.TransactionClient, accountId: string, amount: bigint, reason: string): Promise<bigint> {
  await tx.creditLedgerEntry.create({ data: { accountId, amount, reason } });
  const updated = await tx.account.update({ where: { id: accountId }, data: { creditBalance: { increment: amount } } });
  return updated.creditBalance;
}

/** One page of an account's ledger, newest first; `after` is the last entry of the previous page. `limit + 1` rows at most. */
export function ledgerPage(db: Client, accountId: string, limit: number, after: { t: string; id: string } | null): Promise<CreditLedgerEntry[]> {
  const where: Prisma.CreditLedgerEntryWhereInput[] = [{ accountId }];
  if (after) {
    const t = new Date(after.t);
    where.push({ OR: [{ createdAt: { lt: t } }, { createdAt: t, id: { lt: BigInt(after.id) } }] });
  }
  return db.creditLedgerEntry.findMany({ where: { AND: where }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], take: limit + 1 });
}
