-- The Bell relay moves to the platform's snapshot-window cursor (yovision_platform.outbox_windows,
-- shard_cursors): device_operation_outbox becomes insert-only and one cursor row, shard 0 of outbox
-- 'device_operation_outbox' in the platform's outbox_cursors, says how far the push got. A rejected fact is
-- copied to device_operation_dead_letters with Bell's code; no outbox row is updated any more.

-- Facts still pending now are pushed after the upgrade, in id order (they get this transaction's xid and
-- so share the first window); delivered and dead-lettered facts keep xid NULL and are never pushed again.
ALTER TABLE device_operation_outbox ADD COLUMN xid xid8;
UPDATE device_operation_outbox SET xid = pg_current_xact_id()
 WHERE delivered_at IS NULL AND dead_lettered_at IS NULL;
ALTER TABLE device_operation_outbox ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX device_operation_outbox_xid_idx ON device_operation_outbox (xid) INCLUDE (id);

CREATE TABLE device_operation_dead_letters (
    outbox_id      bigint      PRIMARY KEY REFERENCES device_operation_outbox (id),
    event_id       uuid        NOT NULL UNIQUE,
    fact_version   integer     NOT NULL,
    action         text        NOT NULL,
    actor          text        NOT NULL,
    device_id      uuid        NOT NULL,
    tenant_id      text        NOT NULL,
    site_id        text        NOT NULL,
    changed_fields text[]      NOT NULL,
    config_version bigint      NOT NULL,
    occurred_at    timestamptz NOT NULL,
    error_code     text        NOT NULL,
    recorded_at    timestamptz NOT NULL DEFAULT now()
);
-- The facts the previous relay dead-lettered, so every dead letter is in one place.
INSERT INTO device_operation_dead_letters (outbox_id, event_id, fact_version, action, actor, device_id,
                                           tenant_id, site_id, changed_fields, config_version, occurred_at,
                                           error_code, recorded_at)
SELECT id, event_id, fact_version, action, actor, device_id, tenant_id, site_id, changed_fields,
       config_version, occurred_at, coalesce(dead_letter_code, 'rejected'), dead_lettered_at
  FROM device_operation_outbox WHERE dead_lettered_at IS NOT NULL;

INSERT INTO outbox_cursors (outbox, shard, prev_snapshot, cur_snapshot)
VALUES ('device_operation_outbox', 0, {{schema}}.outbox_snapshot_before_self(),
        {{schema}}.outbox_snapshot_before_self());

-- Insert-only, and the relay of the previous design can no longer claim (its lease UPDATE is refused), so
-- two designs never push the same facts.
REVOKE UPDATE ON device_operation_outbox FROM {{runtime_role}};
GRANT SELECT, INSERT ON device_operation_dead_letters TO {{runtime_role}};
