-- Idempotent consumer: one row per processed event, written in the same transaction as the event's effect.
CREATE TABLE processed_events (
    source_system  text        NOT NULL,
    event_id       uuid        NOT NULL,
    event_type     text        NOT NULL,
    payload_digest bytea       NOT NULL,
    consumer_group text        NOT NULL,
    topic          text        NOT NULL,
    kafka_partition integer    NOT NULL,
    kafka_offset   bigint      NOT NULL,
    processed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_system, event_id)
);

-- The consumer's position, committed with the effects; Kafka's committed offset is only a hint after this.
CREATE TABLE consumer_positions (
    consumer_group  text        NOT NULL,
    topic           text        NOT NULL,
    kafka_partition integer     NOT NULL,
    next_offset     bigint      NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, topic, kafka_partition)
);

-- Messages that can never be applied (undecodable, id_conflict, rejected by the handler): kept, not dropped.
CREATE TABLE consumer_dead_letters (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_group  text        NOT NULL,
    topic           text        NOT NULL,
    kafka_partition integer     NOT NULL,
    kafka_offset    bigint      NOT NULL,
    error_code      text        NOT NULL,
    source_system   text,
    event_id        uuid,
    payload_digest  bytea       NOT NULL,
    message_key     bytea,
    value           bytea       NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (consumer_group, topic, kafka_partition, kafka_offset)
);

GRANT SELECT, INSERT ON processed_events TO {{runtime_role}};
GRANT SELECT, INSERT, UPDATE ON consumer_positions TO {{runtime_role}};
GRANT SELECT, INSERT ON consumer_dead_letters TO {{runtime_role}};
