-- Transactional outbox: rows are written in the same transaction as the state change they announce and
-- published to Kafka by the relay. The relay selects by "unpublished", never by an id cursor, so a row whose
-- transaction commits late (lower id, later commit) is never skipped.
CREATE TABLE outbox (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id         uuid        NOT NULL UNIQUE,
    event_type       text        NOT NULL,
    topic            text        NOT NULL,
    message_key      bytea       NOT NULL,
    value            bytea       NOT NULL,
    headers          jsonb       NOT NULL DEFAULT '[]'::jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    published_at     timestamptz,
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error_code  text,
    lease_owner      text,
    lease_token      uuid,
    lease_expires_at timestamptz,
    CONSTRAINT outbox_lease_complete CHECK (
        (lease_owner IS NULL) = (lease_token IS NULL) AND (lease_token IS NULL) = (lease_expires_at IS NULL)
    )
);

-- The claim scans unpublished rows in id order; per-key order checks look up earlier rows of the same key.
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;
CREATE INDEX outbox_unpublished_key_idx ON outbox (topic, message_key, id) WHERE published_at IS NULL;
CREATE INDEX outbox_published_at_idx ON outbox (published_at) WHERE published_at IS NOT NULL;

GRANT SELECT, INSERT ON outbox TO {{runtime_role}};
GRANT UPDATE (published_at, attempts, next_attempt_at, last_error_code, lease_owner, lease_token, lease_expires_at)
    ON outbox TO {{runtime_role}};
-- Pruning of published rows after their retention; unpublished rows are never deleted
-- (see OutboxRelay.prune_published).
GRANT DELETE ON outbox TO {{runtime_role}};
