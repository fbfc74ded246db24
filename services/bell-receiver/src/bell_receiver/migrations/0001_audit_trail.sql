-- Bell's global audit trail, the relay's nonce receipts and the notification inbox (SPEC section 4).

-- Append-only audit trail: one row per (source_system, event_id), from the signed HTTP relay or Kafka.
CREATE TABLE audit_events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_system  text        NOT NULL,
    event_id       uuid        NOT NULL,
    event_type     text        NOT NULL,
    action         text        NOT NULL,
    actor          text,
    tenant_id      text,
    site_id        text,
    device_id      text,
    occurred_at    timestamptz NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    channel        text        NOT NULL CHECK (channel IN ('http_relay', 'kafka')),
    payload        jsonb       NOT NULL,
    -- SHA-256 of the canonical JSON of payload (bell_receiver.domain.facts.canonical_json)
    payload_digest bytea       NOT NULL CHECK (octet_length(payload_digest) = 32),
    CONSTRAINT audit_events_source_event_key UNIQUE (source_system, event_id)
);
CREATE INDEX audit_events_occurred_at_idx ON audit_events (occurred_at);

CREATE FUNCTION audit_events_reject_change() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;

-- Blocks every role, the owner included (a superuser would have to drop the trigger first).
CREATE TRIGGER audit_events_no_update_delete BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_reject_change();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_reject_change();

GRANT SELECT, INSERT ON audit_events TO {{runtime_role}};

-- Nonce receipts of the signed relay: the exact response, replayed for the same (key_id, nonce, digest).
CREATE TABLE audit_relay_receipts (
    key_id          text        NOT NULL,
    nonce           text        NOT NULL,
    request_digest  bytea       NOT NULL CHECK (octet_length(request_digest) = 32),
    response_status integer     NOT NULL CHECK (response_status BETWEEN 100 AND 599),
    response_body   bytea       NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (key_id, nonce),
    CHECK (expires_at = received_at + interval '600 seconds')
);
CREATE INDEX audit_relay_receipts_expires_at_idx ON audit_relay_receipts (expires_at);

-- The database clock sets both times: a writer cannot back-date a receipt to make it deletable.
CREATE FUNCTION audit_relay_receipts_stamp() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    NEW.received_at := now();
    NEW.expires_at := now() + interval '600 seconds';
    RETURN NEW;
END
$$;

CREATE FUNCTION audit_relay_receipts_reject_unexpired_delete() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF OLD.expires_at > now() THEN
        RAISE EXCEPTION 'audit_relay_receipts: only expired receipts may be deleted'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN OLD;
END
$$;

CREATE TRIGGER audit_relay_receipts_stamp BEFORE INSERT ON audit_relay_receipts
    FOR EACH ROW EXECUTE FUNCTION audit_relay_receipts_stamp();
CREATE TRIGGER audit_relay_receipts_expired_only BEFORE DELETE ON audit_relay_receipts
    FOR EACH ROW EXECUTE FUNCTION audit_relay_receipts_reject_unexpired_delete();

-- No UPDATE, no TRUNCATE: a receipt is written once and deleted only after it expired.
GRANT SELECT, INSERT, DELETE ON audit_relay_receipts TO {{runtime_role}};

-- Notification inbox (e.g. WATCHER_DISABLED), one row per source event.
CREATE TABLE notifications (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       text        NOT NULL,
    kind          text        NOT NULL,
    source_system text        NOT NULL,
    event_id      uuid        NOT NULL,
    occurred_at   timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    data          jsonb       NOT NULL,
    CONSTRAINT notifications_source_event_key UNIQUE (source_system, event_id)
);
CREATE INDEX notifications_user_newest_idx ON notifications (user_id, occurred_at DESC, id DESC);

GRANT SELECT, INSERT ON notifications TO {{runtime_role}};
