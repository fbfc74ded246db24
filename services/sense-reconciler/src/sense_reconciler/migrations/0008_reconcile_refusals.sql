-- A device whose configuration MediaMTX refused (a 4xx that retrying cannot change) is not retried until
-- the device changes: its due row stays failed with next_attempt_at = 'infinity' (never due; every change
-- sets it to now()), and last_error_reason keeps MediaMTX's reason, redacted by the service (no source URI,
-- no quoted value, no URL: printable ASCII, at most 200 characters).
ALTER TABLE reconcile_state ADD COLUMN last_error_reason text;
ALTER TABLE reconcile_state ADD CONSTRAINT reconcile_state_error_reason
    CHECK (last_error_reason IS NULL OR last_error_reason ~ '^[ -~]{1,200}$');
-- The gauge of refused devices per server reads them without scanning every row.
CREATE INDEX reconcile_state_refused_idx ON reconcile_state (media_server_id)
    WHERE next_attempt_at = 'infinity';

GRANT UPDATE (last_error_reason) ON reconcile_state TO {{runtime_role}};
