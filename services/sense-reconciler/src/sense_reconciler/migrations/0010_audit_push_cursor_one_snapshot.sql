-- The audit push's cursor starts at one snapshot, prev = cur. Migration 0005 wrote its first position
-- with two calls of outbox_snapshot_before_self(), and that function is VOLATILE: in READ COMMITTED each
-- call takes a snapshot of its own. A transaction that ended elsewhere between the two calls (any other
-- writer of the database) left cur_snapshot later than prev_snapshot, so the cursor started inside a window
-- (prev, cur] fixed during the migration. That window holds no fact (the migration locks the outbox), yet the
-- pusher read it first: its first read came back empty and every fact waited for the next read (a poll
-- interval), and again after each failed batch until the cursor first moved (a failure goes back to the
-- stored position). No fact was skipped: the next window starts at that cur.
-- With last_id = 0 no fact of the window (prev, cur] counts as pushed, so (prev, prev, 0) says the same as
-- (prev, cur, 0): the facts visible in prev are pushed, no other. A position the pusher stored with
-- last_id = 0 is an exhausted window, prev = cur already; this changes only 0005's first position.
UPDATE outbox_cursors SET cur_snapshot = prev_snapshot
 WHERE outbox = 'device_operation_outbox' AND last_id = 0
   AND cur_snapshot::text <> prev_snapshot::text;
