-- Several MediaMTX servers: each site is assigned to one operator-registered server (SENSE_MEDIA_SERVERS),
-- and a device's path belongs on its site's server. Every row from before is assigned to 'default', the id
-- of the single server of SENSE_MEDIAMTX_API_URL. Server ids are validated (they label metrics), never URLs.
-- The default stays for writers of the previous release during a rolling upgrade: a site they create is on
-- the legacy single server. Current writers always name the server (SENSE_MEDIA_SERVER_DEFAULT).
ALTER TABLE sites ADD COLUMN media_server_id text NOT NULL DEFAULT 'default';
ALTER TABLE sites ADD CONSTRAINT sites_media_server_id CHECK (media_server_id ~ '^[a-z0-9][a-z0-9-]{0,31}$');

-- The server the device's path belongs on (its site's, copied on every change so that each device event
-- carries it; a site move changes it for every device of the site in the same transaction).
ALTER TABLE devices ADD COLUMN media_server_id text NOT NULL DEFAULT 'default';
ALTER TABLE devices ALTER COLUMN media_server_id DROP DEFAULT;
ALTER TABLE devices ADD CONSTRAINT devices_media_server_id CHECK (media_server_id ~ '^[a-z0-9][a-z0-9-]{0,31}$');

-- Writers of the previous release insert devices and their reconcile rows without a server during a rolling
-- upgrade; these triggers copy the site's (and the device's) so a row never names a server its site is not on.
-- The WHEN clauses keep them free for current writers.
CREATE FUNCTION devices_fill_media_server() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    SELECT s.media_server_id INTO NEW.media_server_id FROM {{schema}}.sites s
        WHERE s.tenant_id = NEW.tenant_id AND s.site_id = NEW.site_id;
    RETURN NEW;
END
$$;
CREATE TRIGGER devices_fill_media_server BEFORE INSERT ON devices
    FOR EACH ROW WHEN (NEW.media_server_id IS NULL) EXECUTE FUNCTION devices_fill_media_server();

-- The writer of a server claims the due rows of that server only (one writer per server at a time).
ALTER TABLE reconcile_state ADD COLUMN media_server_id text NOT NULL DEFAULT 'default';
ALTER TABLE reconcile_state ALTER COLUMN media_server_id DROP DEFAULT;
CREATE FUNCTION reconcile_state_fill_media_server() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    SELECT d.media_server_id INTO NEW.media_server_id FROM {{schema}}.devices d WHERE d.id = NEW.device_id;
    RETURN NEW;
END
$$;
CREATE TRIGGER reconcile_state_fill_media_server BEFORE INSERT ON reconcile_state
    FOR EACH ROW WHEN (NEW.media_server_id IS NULL) EXECUTE FUNCTION reconcile_state_fill_media_server();
CREATE INDEX reconcile_state_server_due_idx ON reconcile_state (media_server_id, partition, next_attempt_at)
    WHERE observed_generation < desired_generation;

-- Where a device's path may be configured: written (under the device's lease) before the first add on a
-- server, removed after the exact delete there succeeded (404 included). A move, a disable or a crash in
-- between can therefore never leave a path behind that Sense does not know about. Backfill: every device
-- may have its path on the single server (deleting an absent path is a 404, i.e. done).
CREATE TABLE media_path_placements (
    device_id       uuid        NOT NULL REFERENCES devices (id),
    media_server_id text        NOT NULL,
    path_name       text        NOT NULL,
    placed_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, media_server_id)
);
INSERT INTO media_path_placements (device_id, media_server_id, path_name)
SELECT id, 'default', path_name FROM devices
ON CONFLICT DO NOTHING;

-- Ownership evidence is per (server, path): the orphan scanner classifies each server's paths on their own.
-- The default stays: a reconciler of the previous release only knows the legacy single server.
ALTER TABLE media_path_ownership ADD COLUMN media_server_id text NOT NULL DEFAULT 'default';
ALTER TABLE media_path_ownership DROP CONSTRAINT media_path_ownership_pkey;
ALTER TABLE media_path_ownership ADD PRIMARY KEY (device_id, media_server_id, path_name);

GRANT UPDATE (media_server_id) ON sites TO {{runtime_role}};
GRANT UPDATE (media_server_id) ON devices TO {{runtime_role}};
GRANT UPDATE (media_server_id) ON reconcile_state TO {{runtime_role}};
GRANT SELECT, INSERT, DELETE ON media_path_placements TO {{runtime_role}};
