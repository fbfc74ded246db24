-- The admin list of every user's watchers is keyset-paged by (created_at, id): this index serves
-- `WHERE (created_at, id) > ($1, $2) ORDER BY created_at, id LIMIT n` without sorting the table.
-- (A user's own list uses watchers_user_idx (user_id, created_at, id); the check log uses checks_watcher_idx.)
CREATE INDEX watchers_created_idx ON watchers (created_at, id);
