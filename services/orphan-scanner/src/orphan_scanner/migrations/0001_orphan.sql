-- orphan schema: the ownership projection fed from Sense's events, scan leases, reports, findings, apply runs
-- and per-path dispositions. Nothing here holds a source URI, a credential or a DSN.

-- Current device claims: the latest state of every Sense device (sense.device.v1, key device_id).
CREATE TABLE device_claims (
    device_id      uuid        PRIMARY KEY,
    tenant_id      text        NOT NULL,
    site_id        text        NOT NULL,
    path_name      text        NOT NULL,
    desired_state  text        NOT NULL CHECK (desired_state IN ('enabled', 'disabled')),
    config_version bigint      NOT NULL,
    last_event_id  uuid        NOT NULL,
    occurred_at    timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX device_claims_enabled_path_idx ON device_claims (path_name) WHERE desired_state = 'enabled';

-- Ownership evidence: every (path, device) Sense configured (sense.path-ownership.v1). Only ever grows.
CREATE TABLE path_ownership (
    path_name     text        NOT NULL,
    device_id     uuid        NOT NULL,
    tenant_id     text        NOT NULL,
    site_id       text        NOT NULL,
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (path_name, device_id)
);

-- The scanner singleton: one lease row; every report is written only while its lease (owner + random token
-- + DB-clock expiry) is current, in the same transaction that releases the lease.
CREATE TABLE scan_leases (
    id               text        PRIMARY KEY,
    next_scan_at     timestamptz NOT NULL DEFAULT '-infinity',
    lease_owner      text,
    lease_token      uuid,
    lease_expires_at timestamptz,
    CONSTRAINT scan_leases_lease_complete CHECK (
        (lease_owner IS NULL) = (lease_token IS NULL) AND (lease_token IS NULL) = (lease_expires_at IS NULL)
    )
);
INSERT INTO scan_leases (id) VALUES ('scanner');

CREATE TABLE scan_reports (
    id                uuid        PRIMARY KEY,
    trigger           text        NOT NULL CHECK (trigger IN ('periodic', 'manual')),
    instance_id       text        NOT NULL,
    lease_token       uuid        NOT NULL,   -- the fencing token the scan held
    status            text        NOT NULL CHECK (status IN ('complete', 'failed')),
    error_code        text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz NOT NULL,
    observed_total    integer,
    in_use_count      integer,
    owned_stale_count integer,
    unowned_count     integer,
    CONSTRAINT scan_reports_validity CHECK (expires_at = created_at + interval '15 minutes'),
    CONSTRAINT scan_reports_outcome CHECK (
        (status = 'complete' AND error_code IS NULL
            AND observed_total = in_use_count + owned_stale_count + unowned_count
            AND least(in_use_count, owned_stale_count, unowned_count) >= 0)
        OR (status = 'failed' AND error_code IS NOT NULL AND observed_total IS NULL
            AND in_use_count IS NULL AND owned_stale_count IS NULL AND unowned_count IS NULL)
    )
);
CREATE INDEX scan_reports_created_idx ON scan_reports (created_at);

-- The paths a report did not find in use: owned_stale (deletion candidates) and unowned (report only).
CREATE TABLE scan_findings (
    scan_id    uuid NOT NULL REFERENCES scan_reports (id) ON DELETE CASCADE,
    path_name  text NOT NULL,
    path_class text NOT NULL CHECK (path_class IN ('owned_stale', 'unowned')),
    device_id  uuid,   -- owned_stale: the device that most recently owned the path
    PRIMARY KEY (scan_id, path_name),
    UNIQUE (scan_id, path_name, path_class),
    CONSTRAINT scan_findings_owner CHECK ((path_class = 'owned_stale') = (device_id IS NOT NULL))
);

CREATE TABLE apply_runs (
    id                 uuid        PRIMARY KEY,
    scan_id            uuid        NOT NULL REFERENCES scan_reports (id),
    actor              text        NOT NULL,
    instance_id        text        NOT NULL,
    status             text        NOT NULL CHECK (status IN ('running', 'blocked', 'completed', 'partial')),
    reason_code        text,
    report_candidates  integer     NOT NULL,
    current_total      integer,
    current_candidates integer,
    deleted_count      integer     NOT NULL DEFAULT 0,
    absent_count       integer     NOT NULL DEFAULT 0,
    skipped_count      integer     NOT NULL DEFAULT 0,
    failed_count       integer     NOT NULL DEFAULT 0,
    started_at         timestamptz NOT NULL DEFAULT now(),
    finished_at        timestamptz,
    CONSTRAINT apply_runs_reason CHECK ((status = 'blocked') = (reason_code IS NOT NULL))
);
CREATE INDEX apply_runs_scan_idx ON apply_runs (scan_id);

-- One row per (report, path) an apply acted on. The composite foreign key plus the class check make the
-- database itself refuse a disposition for any path the report did not classify owned_stale -- unowned
-- paths above all -- whoever inserts it.
CREATE TABLE dispositions (
    scan_id         uuid        NOT NULL,
    path_name       text        NOT NULL,
    path_class      text        NOT NULL DEFAULT 'owned_stale' CHECK (path_class = 'owned_stale'),
    outcome         text        NOT NULL
                                CHECK (outcome IN ('attempting', 'deleted', 'already_absent', 'failed',
                                                   'skipped_not_stale')),
    error_code      text,
    actor           text        NOT NULL,
    apply_id        uuid        NOT NULL REFERENCES apply_runs (id),
    attempts        integer     NOT NULL DEFAULT 1 CHECK (attempts >= 1),
    first_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scan_id, path_name),
    FOREIGN KEY (scan_id, path_name, path_class)
        REFERENCES scan_findings (scan_id, path_name, path_class) ON DELETE RESTRICT,
    CONSTRAINT dispositions_error CHECK ((outcome = 'failed') = (error_code IS NOT NULL))
);

-- deleted / already_absent are final: no later apply may rewrite them.
CREATE FUNCTION dispositions_final_is_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.outcome IN ('deleted', 'already_absent') THEN
        RAISE EXCEPTION 'disposition of a deleted path is final' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER dispositions_final_is_immutable BEFORE UPDATE OR DELETE ON dispositions
    FOR EACH ROW EXECUTE FUNCTION dispositions_final_is_immutable();

GRANT SELECT, INSERT ON device_claims TO {{runtime_role}};
GRANT UPDATE (tenant_id, site_id, path_name, desired_state, config_version, last_event_id, occurred_at,
              updated_at) ON device_claims TO {{runtime_role}};
GRANT SELECT, INSERT ON path_ownership TO {{runtime_role}};
GRANT UPDATE (first_seen_at, last_seen_at) ON path_ownership TO {{runtime_role}};
GRANT SELECT ON scan_leases TO {{runtime_role}};
GRANT UPDATE (next_scan_at, lease_owner, lease_token, lease_expires_at) ON scan_leases TO {{runtime_role}};
GRANT SELECT, INSERT, DELETE ON scan_reports TO {{runtime_role}};
GRANT SELECT, INSERT, DELETE ON scan_findings TO {{runtime_role}};
GRANT SELECT, INSERT ON apply_runs TO {{runtime_role}};
GRANT UPDATE (status, reason_code, current_total, current_candidates, deleted_count, absent_count,
              skipped_count, failed_count, finished_at) ON apply_runs TO {{runtime_role}};
GRANT SELECT, INSERT ON dispositions TO {{runtime_role}};
GRANT UPDATE (outcome, error_code, actor, apply_id, attempts, last_attempt_at) ON dispositions
    TO {{runtime_role}};
