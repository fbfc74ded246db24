-- Redacted device-audit facts, written in the same transaction as the device change. The Bell relay marks
-- delivery or dead-letters a fact; facts are never deleted (no DELETE grant).
CREATE TABLE device_operation_outbox (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id         uuid        NOT NULL UNIQUE,
    fact_version     integer     NOT NULL,
    action           text        NOT NULL,
    actor            text        NOT NULL,
    device_id        uuid        NOT NULL REFERENCES devices (id),
    tenant_id        text        NOT NULL,
    site_id          text        NOT NULL,
    changed_fields   text[]      NOT NULL DEFAULT '{}',
    config_version   bigint      NOT NULL,
    occurred_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error_code  text,
    dead_lettered_at timestamptz,
    dead_letter_code text,
    lease_owner      text,
    lease_token      uuid,
    lease_expires_at timestamptz,
    CONSTRAINT device_operation_outbox_fact_version CHECK (fact_version IN (1, 2)),
    CONSTRAINT device_operation_outbox_action CHECK (action ~ '^[a-z_]+\.[a-z_]+$'),
    CONSTRAINT device_operation_outbox_lease_complete CHECK (
        (lease_owner IS NULL) = (lease_token IS NULL) AND (lease_token IS NULL) = (lease_expires_at IS NULL)
    )
);
CREATE INDEX device_operation_outbox_pending_idx ON device_operation_outbox (next_attempt_at, id)
    WHERE delivered_at IS NULL AND dead_lettered_at IS NULL;

GRANT SELECT, INSERT ON device_operation_outbox TO {{runtime_role}};
GRANT UPDATE (delivered_at, attempts, next_attempt_at, last_error_code, dead_lettered_at, dead_letter_code,
              lease_owner, lease_token, lease_expires_at)
    ON device_operation_outbox TO {{runtime_role}};
