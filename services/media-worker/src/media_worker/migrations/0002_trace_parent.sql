-- The W3C traceparent (yovision_platform.tracing) of the request that opened an upload session, and of the
-- work that queued a transcode job: the session's chunks and merge, and the job's transcode, continue that
-- trace, so one trace runs from the upload's first request through the transcode to Bell. Only this
-- process's own rendering of a parsed context is stored (the bound is the platform's
-- TRACEPARENT_MAX_CHARS); NULL when there was none.
ALTER TABLE upload_sessions ADD COLUMN trace_parent text CHECK (length(trace_parent) <= 128);
ALTER TABLE transcode_jobs ADD COLUMN trace_parent text CHECK (length(trace_parent) <= 128);
