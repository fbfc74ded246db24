"""Pure domain of sense-reconciler: limits, errors, device validation, records, reconcile decisions and the
audit push's rules. No I/O here."""
