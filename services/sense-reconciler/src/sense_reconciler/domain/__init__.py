"""Pure domain of sense-reconciler: limits, device validation, reconcile decisions. No I/O here."""
