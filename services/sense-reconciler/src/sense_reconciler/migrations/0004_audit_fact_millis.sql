-- A device-audit fact reaches Bell over two channels (the signed HTTP push reads this row; the Kafka
-- DeviceAuditRecorded event carries epoch milliseconds), and Bell's digest covers occurred_at. So the fact
-- is timed once, by the database clock, at whole milliseconds, and both channels carry that instant
-- (contract sense-audit-relay-v1, yovision_platform.audit_relay). NOT VALID: rows written before this
-- migration keep their microseconds (facts are never changed).
ALTER TABLE device_operation_outbox ALTER COLUMN occurred_at SET DEFAULT date_trunc('milliseconds', now());
ALTER TABLE device_operation_outbox
    ADD CONSTRAINT device_operation_outbox_occurred_at_millis
    CHECK (occurred_at = date_trunc('milliseconds', occurred_at)) NOT VALID;
