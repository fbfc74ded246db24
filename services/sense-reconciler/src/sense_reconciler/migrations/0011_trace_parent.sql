-- The W3C traceparent of the request that last made the device due (yovision_platform.tracing): the
-- reconcile it causes continues that trace. Written only as this process renders a parsed context (55
-- characters for version 00; the bound is the platform's TRACEPARENT_MAX_CHARS); NULL when there was none,
-- and for drift checks, which start a trace of their own.
ALTER TABLE reconcile_state ADD COLUMN trace_parent text CHECK (length(trace_parent) <= 128);

GRANT UPDATE (trace_parent) ON reconcile_state TO {{runtime_role}};

-- The same for each device-audit fact: the audit push continues the trace of the change it reports.
ALTER TABLE device_operation_outbox ADD COLUMN trace_parent text CHECK (length(trace_parent) <= 128);
