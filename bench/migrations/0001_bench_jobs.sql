-- The bench's own service track: a leased job table shaped like the platform tests' `jobs`, plus a partial
-- index on pending rows so a claim never rescans finished jobs (as a real service table would have).
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

CREATE INDEX jobs_pending_idx ON jobs (id) WHERE status = 'pending';

GRANT SELECT, INSERT ON jobs TO {{runtime_role}};
GRANT UPDATE (status, result, next_attempt_at, lease_owner, lease_token, lease_expires_at) ON jobs TO {{runtime_role}};
