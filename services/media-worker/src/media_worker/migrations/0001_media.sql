-- media schema: materials, chunked upload sessions, durable transcode jobs with fenced leases, instances.

CREATE TABLE materials (
    id               uuid        PRIMARY KEY,
    owner_subject    text        NOT NULL,
    title            text        NOT NULL DEFAULT '',
    upload_mode      text        NOT NULL CHECK (upload_mode IN ('multipart', 'chunked')),
    source_path      text        NOT NULL,   -- storage key of the canonical source; never deleted
    size_bytes       bigint      NOT NULL CHECK (size_bytes > 0),
    sha256           text        NOT NULL,
    content_type     text,
    status           text        NOT NULL DEFAULT 'pending'
                                 CHECK (status IN ('pending', 'processing', 'done', 'failed')),
    progress         smallint    NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
    cover_ref        text,
    preview_ref      text,
    clip_ref         text,
    error_code       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    protection_until timestamptz NOT NULL DEFAULT now() + interval '15 days',
    CONSTRAINT materials_protection_window CHECK (protection_until = created_at + interval '15 days')
);
CREATE INDEX materials_owner_idx ON materials (owner_subject, created_at DESC);

CREATE TABLE upload_sessions (
    id             uuid        PRIMARY KEY,
    owner_subject  text        NOT NULL,
    upload_key     text        NOT NULL,   -- the client's resume key
    title          text        NOT NULL DEFAULT '',
    content_type   text,
    total_bytes    bigint      NOT NULL CHECK (total_bytes > 0),
    chunk_bytes    bigint      NOT NULL CHECK (chunk_bytes > 0),
    chunk_count    integer     NOT NULL CHECK (chunk_count > 0),
    received       integer[]   NOT NULL DEFAULT '{}',
    state          text        NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'merging', 'completed')),
    material_id    uuid        NOT NULL UNIQUE,   -- fixed at init, so a merge retry targets the same file
    merged_path    text,
    merge_owner    text,
    merge_started_at timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner_subject, upload_key)
);

CREATE TABLE transcode_jobs (
    id               uuid        PRIMARY KEY,
    material_id      uuid        NOT NULL UNIQUE REFERENCES materials (id),
    state            text        NOT NULL DEFAULT 'pending'
                                 CHECK (state IN ('pending', 'running', 'done', 'failed')),
    attempt          integer     NOT NULL DEFAULT 0,
    error_code       text,
    lease_owner      text,
    lease_token      uuid,
    lease_expires_at timestamptz,
    heartbeat_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT transcode_jobs_lease_complete CHECK (
        (lease_owner IS NULL) = (lease_token IS NULL) AND (lease_token IS NULL) = (lease_expires_at IS NULL)
    )
);
CREATE INDEX transcode_jobs_due_idx ON transcode_jobs (created_at) WHERE state IN ('pending', 'running');

-- Each running instance records itself; drain requests are recorded here too.
CREATE TABLE instances (
    instance_id  text        PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    seen_at      timestamptz NOT NULL DEFAULT now(),
    draining     boolean     NOT NULL DEFAULT false
);

GRANT SELECT, INSERT ON materials TO {{runtime_role}};
GRANT UPDATE (status, progress, cover_ref, preview_ref, clip_ref, error_code, updated_at)
    ON materials TO {{runtime_role}};
GRANT SELECT, INSERT ON upload_sessions TO {{runtime_role}};
GRANT UPDATE (received, state, merged_path, merge_owner, merge_started_at, updated_at)
    ON upload_sessions TO {{runtime_role}};
GRANT SELECT, INSERT ON transcode_jobs TO {{runtime_role}};
GRANT UPDATE (state, attempt, error_code, lease_owner, lease_token, lease_expires_at, heartbeat_at, updated_at)
    ON transcode_jobs TO {{runtime_role}};
GRANT SELECT, INSERT ON instances TO {{runtime_role}};
GRANT UPDATE (seen_at, draining) ON instances TO {{runtime_role}};
