-- Sites, devices and the per-device reconcile row (due row + fenced lease).
-- Source URIs are secrets: stored here, never selected into API responses, events, logs or audit rows.
CREATE TABLE sites (
    tenant_id          text        NOT NULL,
    site_id            text        NOT NULL,
    max_video_channels integer     NOT NULL DEFAULT 16,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, site_id),
    CONSTRAINT sites_max_video_channels_range CHECK (max_video_channels BETWEEN 1 AND 128)
);

CREATE TABLE devices (
    id             uuid        PRIMARY KEY,
    tenant_id      text        NOT NULL,
    site_id        text        NOT NULL,
    name           text        NOT NULL,
    path_name      text        NOT NULL UNIQUE,
    source_uri     text        NOT NULL,
    desired_state  text        NOT NULL,
    config_version bigint      NOT NULL DEFAULT 1,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, site_id) REFERENCES sites (tenant_id, site_id),
    CONSTRAINT devices_desired_state CHECK (desired_state IN ('enabled', 'disabled')),
    CONSTRAINT devices_config_version_positive CHECK (config_version >= 1)
);
CREATE INDEX devices_site_idx ON devices (tenant_id, site_id, desired_state);
CREATE INDEX devices_list_idx ON devices (tenant_id, created_at, id);

CREATE TABLE reconcile_state (
    device_id           uuid        PRIMARY KEY REFERENCES devices (id),
    desired_generation  bigint      NOT NULL DEFAULT 1,
    observed_generation bigint      NOT NULL DEFAULT 0,
    status              text        NOT NULL DEFAULT 'pending',
    attempts            integer     NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    last_error_code     text,
    last_result_at      timestamptz,
    partition           integer     NOT NULL,
    lease_owner         text,
    lease_token         uuid,
    lease_expires_at    timestamptz,
    CONSTRAINT reconcile_state_status CHECK (status IN ('pending', 'converged', 'failed')),
    CONSTRAINT reconcile_state_partition CHECK (partition >= 0),
    CONSTRAINT reconcile_state_lease_complete CHECK (
        (lease_owner IS NULL) = (lease_token IS NULL) AND (lease_token IS NULL) = (lease_expires_at IS NULL)
    ),
    CONSTRAINT reconcile_state_error_code CHECK (last_error_code IS NULL OR last_error_code ~ '^[a-z0-9_]{1,64}$')
);
-- The claim scans due rows of owned partitions in next_attempt_at order.
CREATE INDEX reconcile_state_due_idx ON reconcile_state (partition, next_attempt_at)
    WHERE observed_generation < desired_generation;

GRANT SELECT, INSERT ON sites TO {{runtime_role}};
GRANT UPDATE (max_video_channels, updated_at) ON sites TO {{runtime_role}};
GRANT SELECT, INSERT ON devices TO {{runtime_role}};
GRANT UPDATE (name, source_uri, desired_state, config_version, updated_at) ON devices TO {{runtime_role}};
GRANT SELECT, INSERT ON reconcile_state TO {{runtime_role}};
GRANT UPDATE (desired_generation, observed_generation, status, attempts, next_attempt_at, last_error_code,
              last_result_at, lease_owner, lease_token, lease_expires_at)
    ON reconcile_state TO {{runtime_role}};
