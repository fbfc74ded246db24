-- Watchers: one row per user-defined HTTP probe. Headers and body are AES-256-GCM ciphertext
-- (adapters/crypto.py); due-ness lives only here (next_check_at), so a restart needs no recovery.
-- lease_* columns: a scheduler instance claims due rows with FOR UPDATE SKIP LOCKED and a DB-clock lease, so
-- several instances never probe one watcher twice for one due time.
CREATE TABLE watchers (
    id                   uuid        PRIMARY KEY,
    user_id              text        NOT NULL,
    agent_id             text        NOT NULL,
    name                 text        NOT NULL,
    url                  text        NOT NULL,
    method               text        NOT NULL CHECK (method IN ('GET', 'POST')),
    headers_ciphertext   bytea       NOT NULL,
    body_ciphertext      bytea,
    body_length          integer,
    interval_minutes     integer     NOT NULL CHECK (interval_minutes BETWEEN 1 AND 1440),
    compare_mode         text        NOT NULL CHECK (compare_mode IN ('HASH', 'JSON_FIELD', 'STATUS_CODE')),
    json_path            text,
    prompt_template      text        NOT NULL,
    status               text        NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'PAUSED', 'DISABLED')),
    last_value_hash      text,
    last_value_excerpt   text,
    last_checked_at      timestamptz,
    last_changed_at      timestamptz,
    consecutive_failures integer     NOT NULL DEFAULT 0,
    next_check_at        timestamptz NOT NULL DEFAULT now(),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    lease_owner          text,
    lease_token          uuid,
    lease_expires_at     timestamptz,
    CONSTRAINT watchers_lease_complete CHECK (
        (lease_owner IS NULL) = (lease_token IS NULL) AND (lease_token IS NULL) = (lease_expires_at IS NULL)
    )
);
CREATE INDEX watchers_due_idx ON watchers (next_check_at) WHERE status = 'ACTIVE';
CREATE INDEX watchers_user_idx ON watchers (user_id, created_at, id);

-- One row per probe. Deleting a watcher deletes its checks (ON DELETE CASCADE); produced runs live elsewhere.
CREATE TABLE checks (
    id           uuid        PRIMARY KEY,
    watcher_id   uuid        NOT NULL REFERENCES watchers (id) ON DELETE CASCADE,
    checked_at   timestamptz NOT NULL DEFAULT now(),
    http_status  integer,
    value_hash   text,
    changed      boolean     NOT NULL DEFAULT false,
    trigger_id   uuid,
    error_code   text,
    duration_ms  integer,
    warning      text
);
CREATE INDEX checks_watcher_idx ON checks (watcher_id, checked_at DESC, id DESC);
CREATE INDEX checks_checked_at_idx ON checks (checked_at);
CREATE INDEX checks_triggers_idx ON checks (watcher_id, checked_at) WHERE trigger_id IS NOT NULL;

GRANT SELECT, INSERT, UPDATE, DELETE ON watchers TO {{runtime_role}};
GRANT SELECT, INSERT, DELETE ON checks TO {{runtime_role}};
