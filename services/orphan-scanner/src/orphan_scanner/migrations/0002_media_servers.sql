-- Several MediaMTX servers: every path is classified per (server, path), and the gate is computed per
-- server. Rows from before are on 'default', the id of the single server of ORPHAN_MEDIAMTX_API_URL.

-- A device claims its path on its server. NULL: a claim from a Sense event written before several servers,
-- which claims the name on every server (protective: such a path is never a candidate anywhere).
ALTER TABLE device_claims ADD COLUMN media_server_id text;
DROP INDEX device_claims_enabled_path_idx;
CREATE INDEX device_claims_enabled_path_idx ON device_claims (path_name, media_server_id)
    WHERE desired_state = 'enabled';

-- Ownership evidence is per server: Sense configured the path on that server.
ALTER TABLE path_ownership ADD COLUMN media_server_id text NOT NULL DEFAULT 'default';
ALTER TABLE path_ownership ALTER COLUMN media_server_id DROP DEFAULT;
ALTER TABLE path_ownership DROP CONSTRAINT path_ownership_pkey;
ALTER TABLE path_ownership ADD PRIMARY KEY (media_server_id, path_name, device_id);

-- Findings and dispositions name the server; the composite foreign key still makes the database refuse a
-- disposition of any (server, path) the report did not classify owned_stale.
ALTER TABLE dispositions DROP CONSTRAINT dispositions_scan_id_path_name_path_class_fkey;
ALTER TABLE dispositions DROP CONSTRAINT dispositions_pkey;
ALTER TABLE scan_findings DROP CONSTRAINT scan_findings_scan_id_path_name_path_class_key;
ALTER TABLE scan_findings DROP CONSTRAINT scan_findings_pkey;
ALTER TABLE scan_findings ADD COLUMN media_server_id text NOT NULL DEFAULT 'default';
ALTER TABLE scan_findings ALTER COLUMN media_server_id DROP DEFAULT;
ALTER TABLE scan_findings ADD PRIMARY KEY (scan_id, media_server_id, path_name);
ALTER TABLE scan_findings ADD UNIQUE (scan_id, media_server_id, path_name, path_class);
ALTER TABLE dispositions ADD COLUMN media_server_id text NOT NULL DEFAULT 'default';
ALTER TABLE dispositions ALTER COLUMN media_server_id DROP DEFAULT;
ALTER TABLE dispositions ADD PRIMARY KEY (scan_id, media_server_id, path_name);
ALTER TABLE dispositions ADD FOREIGN KEY (scan_id, media_server_id, path_name, path_class)
    REFERENCES scan_findings (scan_id, media_server_id, path_name, path_class) ON DELETE RESTRICT;

-- Per-server counts of a usable report (the per-server gate preview and the metrics); reports from before
-- have their totals on 'default'.
CREATE TABLE scan_server_counts (
    scan_id           uuid    NOT NULL REFERENCES scan_reports (id) ON DELETE CASCADE,
    media_server_id   text    NOT NULL,
    observed_total    integer NOT NULL,
    in_use_count      integer NOT NULL,
    owned_stale_count integer NOT NULL,
    unowned_count     integer NOT NULL,
    PRIMARY KEY (scan_id, media_server_id),
    CONSTRAINT scan_server_counts_sum CHECK (
        observed_total = in_use_count + owned_stale_count + unowned_count
        AND least(in_use_count, owned_stale_count, unowned_count) >= 0
    )
);
INSERT INTO scan_server_counts
SELECT id, 'default', observed_total, in_use_count, owned_stale_count, unowned_count
  FROM scan_reports WHERE status = 'complete';

-- The server whose gate blocked an apply (NULL when the reason is not one server's).
ALTER TABLE apply_runs ADD COLUMN blocked_media_server_id text;

GRANT UPDATE (media_server_id) ON device_claims TO {{runtime_role}};
GRANT SELECT, INSERT, DELETE ON scan_server_counts TO {{runtime_role}};
GRANT UPDATE (blocked_media_server_id) ON apply_runs TO {{runtime_role}};
