-- Source URIs (camera credentials) encrypted at rest with the platform key ring (yovision_platform.encryption,
-- associated data "sense:devices:<id>:source_uri"). A migration holds no key, so rows from before keep their
-- cleartext in source_uri until the service encrypts them (at start-up, and by `sense-reconciler rotate-keys`);
-- every write from now on stores only the ciphertext. Exactly one of the two columns is set.
ALTER TABLE devices ADD COLUMN source_uri_ciphertext bytea;
ALTER TABLE devices ALTER COLUMN source_uri DROP NOT NULL;
ALTER TABLE devices ADD CONSTRAINT devices_source_uri_stored_once
    CHECK ((source_uri IS NULL) <> (source_uri_ciphertext IS NULL));

GRANT UPDATE (source_uri_ciphertext) ON devices TO {{runtime_role}};
