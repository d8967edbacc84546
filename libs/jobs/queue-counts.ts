import type { Db } from '#libs/db';

/**
 * Removes job_queue_counts rows left at zero. An insert batch locks its accounts' rows, creating
 * them at zero where missing; a batch that then added no job (all refused) leaves such a row
 * behind, which positions would read on every call. Rows another transaction holds are skipped,
 * not waited for: waiting could deadlock with a batch that locks several accounts in id order.
 */
export async function dropEmptyQueueCounts(db: Db): Promise<number> {
  return db.$executeRaw`
    DELETE FROM job_queue_counts WHERE account_id IN (
      SELECT account_id FROM job_queue_counts WHERE waiting = 0 AND handed = 0 AND running = 0
      FOR UPDATE SKIP LOCKED)`;
}
