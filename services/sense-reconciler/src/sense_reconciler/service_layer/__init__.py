"""Use cases on ports (`ports`): device and site commands (one unit of work each, writing state, audit fact,
outbox events and due row together), the reconciler and the audit push; and the service's metrics."""
