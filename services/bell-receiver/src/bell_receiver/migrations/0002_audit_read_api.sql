-- The audit read API (GET /v1/audit-events): newest first, keyset-paged by (occurred_at, id), filtered by
-- source system + event type or by device. Each filter the API offers has an index that serves its order.
CREATE INDEX audit_events_newest_idx ON audit_events (occurred_at DESC, id DESC);
CREATE INDEX audit_events_source_type_idx ON audit_events (source_system, event_type, occurred_at DESC, id DESC);
CREATE INDEX audit_events_device_idx ON audit_events (device_id, occurred_at DESC, id DESC)
    WHERE device_id IS NOT NULL;
DROP INDEX audit_events_occurred_at_idx;
