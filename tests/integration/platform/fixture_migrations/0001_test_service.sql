-- A stand-in service track for the platform tests: a leased job table and a table of applied effects.
CREATE TABLE jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payload          text        NOT NULL,
    status           text        NOT NULL DEFAULT 'pending',
    result           text,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_owner      text,
    lease_token      uuid,
    lease_expires_at timestamptz
);

CREATE TABLE applied_effects (
    event_id   uuid PRIMARY KEY,
    applied    integer NOT NULL DEFAULT 1,
    event_type text    NOT NULL
);

GRANT SELECT, INSERT ON jobs TO {{runtime_role}};
GRANT UPDATE (status, result, next_attempt_at, lease_owner, lease_token, lease_expires_at) ON jobs TO {{runtime_role}};
GRANT SELECT, INSERT, UPDATE ON applied_effects TO {{runtime_role}};
