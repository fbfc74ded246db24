-- History of (device, MediaMTX path) pairs Sense has configured: the orphan scanner's ownership evidence.
-- Backfilled from the devices that exist now; only ids and path names are copied, never URIs.
CREATE TABLE media_path_ownership (
    device_id     uuid        NOT NULL REFERENCES devices (id),
    path_name     text        NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, path_name)
);
CREATE INDEX media_path_ownership_path_idx ON media_path_ownership (path_name);

INSERT INTO media_path_ownership (device_id, path_name, first_seen_at, last_seen_at)
SELECT id, path_name, created_at, updated_at FROM devices
ON CONFLICT DO NOTHING;

GRANT SELECT, INSERT ON media_path_ownership TO {{runtime_role}};
GRANT UPDATE (last_seen_at) ON media_path_ownership TO {{runtime_role}};
