"""Use cases of orphan-scanner: projection, scan, apply, metrics."""
