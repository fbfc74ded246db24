-- A change of a device's source URI marks its due row `replace_due`: the reconciler then replaces the path
-- at once, without reading it first (MediaMTX's configuration differs, and a replace creates a missing path
-- too). A retry keeps the mark; the completion that observes the newest generation clears it. Drift checks
-- and other changes (a rename, a move, a new desired state) leave it false: they read the path first and
-- touch MediaMTX's configuration only when it differs.
ALTER TABLE reconcile_state ADD COLUMN replace_due boolean NOT NULL DEFAULT false;

GRANT UPDATE (replace_due) ON reconcile_state TO {{runtime_role}};
