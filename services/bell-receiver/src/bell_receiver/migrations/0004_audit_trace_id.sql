-- The trace each audit row was stored in (yovision_platform.tracing): the 32-hex W3C trace id continued
-- from the Kafka record's headers or the signed push's item header, NULL when none came (rows stored before
-- tracing, a producer without it). Not part of the fact: the digest and idempotency ignore it, so a fact
-- arriving over both channels with different traces is still one row, keeping the first arrival's trace.
ALTER TABLE audit_events ADD COLUMN trace_id text CHECK (trace_id ~ '^[0-9a-f]{32}$');
