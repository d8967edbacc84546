-- Takes a blob's lock (as every record and deletion of the bytes does) and then says whether the
-- account holds no live record of the bytes: what `created_new` of an asset recorded now says.
-- Lets one statement record an asset under the lock in one round trip: VOLATILE, so the question
-- is asked in a snapshot taken after the lock, and sees a record of the same bytes committed while
-- the statement waited for it (the statement's own snapshot, taken before, would not).
CREATE FUNCTION "blob_lock_new_to_account"(p_account UUID, p_hash TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  fresh BOOLEAN;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_hash, 0));
  SELECT NOT EXISTS (SELECT 1 FROM assets mine WHERE mine.account_id = p_account AND mine.blob_hash = p_hash
                     AND (mine.expires_at IS NULL OR mine.expires_at > now()))
    INTO fresh;
  RETURN fresh;
END $$;
