-- Snapshot-window relays (PgQ style, see yovision_platform.outbox_windows): the outbox becomes insert-only.
-- Each row carries the id of the transaction that wrote it (xid) and its shard; each (outbox, shard) has one
-- cursor row holding the owner's lease and the window [prev_snapshot, cur_snapshot) + last_id. Nothing
-- marks a row published any more: a row is published once its shard's cursor has passed it.

-- Kafka's default partitioner (murmur2, as yovision_platform.kafka.partition_for_key): the shard of a key, so
-- that shard = Kafka partition for a topic with `shards` partitions (and determines it when the partition
-- count divides `shards`). Writers compute it in Python; this copy serves this upgrade and older writers.
CREATE FUNCTION outbox_key_shard(key bytea, shards integer) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
    m CONSTANT bigint := 1540483477;  -- 0x5bd1e995
    mask CONSTANT bigint := 4294967295;
    len CONSTANT integer := length(key);
    tail CONSTANT integer := len - len % 4;
    h bigint := (2538058380 # len) & 4294967295;  -- seed 0x9747b28c ^ length
    k bigint;
    i integer := 0;
BEGIN
    WHILE i < tail LOOP
        k := get_byte(key, i) | (get_byte(key, i + 1) << 8) | (get_byte(key, i + 2) << 16)
             | (get_byte(key, i + 3)::bigint << 24);
        k := (k * m) & mask;
        k := k # (k >> 24);
        k := (k * m) & mask;
        h := ((h * m) & mask) # k;
        i := i + 4;
    END LOOP;
    IF len % 4 = 3 THEN h := h # (get_byte(key, tail + 2) << 16); END IF;
    IF len % 4 >= 2 THEN h := h # (get_byte(key, tail + 1) << 8); END IF;
    IF len % 4 >= 1 THEN h := ((h # get_byte(key, tail)) * m) & mask; END IF;
    h := h # (h >> 13);
    h := (h * m) & mask;
    h := h # (h >> 15);
    RETURN ((h & 2147483647) % shards)::integer;
END
$$;

-- The snapshot of the calling transaction with the transaction itself counted as running, so that rows it
-- writes (e.g. carried over by a migration) fall in the first window after it commits.
CREATE FUNCTION outbox_snapshot_before_self() RETURNS pg_snapshot
    LANGUAGE sql VOLATILE SET search_path = pg_catalog AS $$
    SELECT CASE
        WHEN me >= pg_snapshot_xmax(snap) THEN snap
        ELSE format('%s:%s:%s', least(pg_snapshot_xmin(snap), me), pg_snapshot_xmax(snap),
                    (SELECT string_agg(x::text, ',' ORDER BY x)
                       FROM (SELECT pg_snapshot_xip(snap) AS x UNION SELECT me) AS running))::pg_snapshot
    END
    FROM (SELECT pg_current_snapshot() AS snap, pg_current_xact_id() AS me) AS now_
$$;

-- The upgrade: rows unpublished now are relayed after it, in id order (they all get this transaction's
-- xid, so they share the first window). Rows already published keep xid NULL and are never relayed again.
ALTER TABLE outbox ADD COLUMN xid xid8, ADD COLUMN shard smallint;
UPDATE outbox SET xid = pg_current_xact_id(), shard = {{schema}}.outbox_key_shard(message_key, 6)
 WHERE published_at IS NULL;
-- Dropping the lease and publish-state columns also stops any relay of the previous design (its SQL no
-- longer runs), so two designs never publish one row.
ALTER TABLE outbox
    DROP COLUMN published_at,
    DROP COLUMN attempts,
    DROP COLUMN next_attempt_at,
    DROP COLUMN last_error_code,
    DROP COLUMN lease_owner,
    DROP COLUMN lease_token,
    DROP COLUMN lease_expires_at;
ALTER TABLE outbox ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
ALTER TABLE outbox ADD CONSTRAINT outbox_relayed_rows_have_a_shard
    CHECK ((xid IS NULL) = (shard IS NULL) AND (shard IS NULL OR shard BETWEEN 0 AND 5));
-- The window query looks rows up by (shard, xid): a range for transactions newer than the previous snapshot
-- and exact values for those that were running then.
CREATE INDEX outbox_shard_xid_idx ON outbox (shard, xid) INCLUDE (id);
CREATE INDEX outbox_created_at_idx ON outbox (created_at);

-- Writers of the previous release insert without a shard during a rolling upgrade; the WHEN clause keeps
-- this trigger free for current writers.
CREATE FUNCTION outbox_fill_shard() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    NEW.shard := {{schema}}.outbox_key_shard(NEW.message_key, 6);
    RETURN NEW;
END
$$;
CREATE TRIGGER outbox_fill_shard BEFORE INSERT ON outbox
    FOR EACH ROW WHEN (NEW.shard IS NULL AND NEW.xid IS NOT NULL) EXECUTE FUNCTION outbox_fill_shard();

-- Insert-only: the runtime role keeps SELECT, INSERT and DELETE (retention, see OutboxRelay.prune).
REVOKE UPDATE ON outbox FROM {{runtime_role}};
GRANT EXECUTE ON FUNCTION outbox_key_shard(bytea, integer) TO {{runtime_role}};

-- One row per (outbox, shard). A relay takes a free or expired shard by bumping epoch; every later write is
-- fenced on (owner, epoch): zero rows updated means another relay took the shard over.
CREATE TABLE outbox_cursors (
    outbox           text        NOT NULL,
    shard            smallint    NOT NULL,
    owner            text,
    epoch            bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    -- Rows visible in prev_snapshot are published; of those visible in cur_snapshot and not in
    -- prev_snapshot, the ones with id <= last_id are.
    prev_snapshot    pg_snapshot NOT NULL,
    cur_snapshot     pg_snapshot NOT NULL,
    last_id          bigint      NOT NULL DEFAULT 0,
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error_code  text,
    advanced_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (outbox, shard),
    CONSTRAINT outbox_cursors_lease_complete CHECK ((owner IS NULL) = (lease_expires_at IS NULL))
);

-- Relays that currently want shards of an outbox; shards are split between the live members.
CREATE TABLE outbox_relay_members (
    outbox     text        NOT NULL,
    owner      text        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (outbox, owner)
);

INSERT INTO outbox_cursors (outbox, shard, prev_snapshot, cur_snapshot)
SELECT 'outbox', shard, {{schema}}.outbox_snapshot_before_self(), {{schema}}.outbox_snapshot_before_self()
  FROM generate_series(0, 5) AS shard;

GRANT SELECT ON outbox_cursors TO {{runtime_role}};
GRANT UPDATE (owner, epoch, lease_expires_at, prev_snapshot, cur_snapshot, last_id, attempts, next_attempt_at,
              last_error_code, advanced_at)
    ON outbox_cursors TO {{runtime_role}};
GRANT SELECT, INSERT, UPDATE, DELETE ON outbox_relay_members TO {{runtime_role}};
