-- Each relay shard's cursor starts at one snapshot, prev = cur. Migration 0003 wrote the first positions
-- with two calls of outbox_snapshot_before_self() per row, and that function is VOLATILE: in READ COMMITTED
-- each call takes a snapshot of its own. A transaction that ended elsewhere between the calls (any other
-- writer of the database) left cur_snapshot later than prev_snapshot, so the shard started inside a window
-- (prev, cur] fixed during the migration, which holds no row (the migration creates the outbox). The relay
-- read that window first: an empty first read, every row waiting one more read, and the same again after
-- each failed batch until the cursor first moved (a failure goes back to the stored position). No row was
-- skipped: the next window starts at that cur. The same fault and repair as Sense's audit push cursor
-- (sense-reconciler migration 0010).
-- With last_id = 0 no row of the window (prev, cur] counts as published, so (prev, prev, 0) says the same
-- as (prev, cur, 0). A position the relay stored with last_id = 0 is an exhausted window, prev = cur
-- already; this changes only 0003's first positions.
UPDATE outbox_cursors SET cur_snapshot = prev_snapshot
 WHERE outbox = 'outbox' AND last_id = 0
   AND cur_snapshot::text <> prev_snapshot::text;
