-- The relay looks up the rows of each transaction running at a window's start by (shard, xid)
-- (yovision_platform.outbox_windows). Its statistics rarely know how distinct xid is: a young table's
-- sample holds one or two transactions, and one bulk transaction can fill most of a later sample. On
-- either, the planner took a lookup by xid to match a large part of the table and read the whole table per
-- running transaction (a sequential scan: 800 pages for a 20,000-row shard). An outbox transaction writes a
-- few rows, so xid is declared about as distinct as the rows (each value matches ~2 rows); ANALYZE keeps
-- this instead of its estimate.
ALTER TABLE outbox ALTER COLUMN xid SET (n_distinct = -0.5);
