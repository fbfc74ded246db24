"""Every SPEC limit of orphan-scanner in one place, each with its unit in the name."""

from __future__ import annotations

# Periodic read-only scan.
SCAN_INTERVAL_SECONDS_DEFAULT = 60.0
SCAN_INTERVAL_SECONDS_MIN = 1.0
SCAN_INTERVAL_SECONDS_MAX = 86_400.0
SCAN_LEASE_SECONDS_DEFAULT = 30.0
MEDIAMTX_DEADLINE_SECONDS_DEFAULT = 20.0

# A report's scan id is valid for apply for exactly this long after the scan (DB clock).
REPORT_VALIDITY_MS = 15 * 60 * 1000

# The safety gate: candidates * DELETE_RATIO_DENOMINATOR <= current_total * DELETE_RATIO_NUMERATOR
# (at most 10 % of the configured paths), in integers only.
DELETE_RATIO_NUMERATOR = 10
DELETE_RATIO_DENOMINATOR = 100
APPLY_MIN_CANDIDATES = 1
APPLY_MAX_CANDIDATES = 128

# How long apply waits for the ownership projection to reach the topics' end offsets.
CATCH_UP_TIMEOUT_SECONDS_DEFAULT = 30.0
CATCH_UP_TIMEOUT_SECONDS_MAX = 300.0

# How often the service re-reads the DB-derived metrics and the projection lag.
METRICS_REFRESH_SECONDS_DEFAULT = 15.0

# CLI input shapes.
ACTOR_MAX_CHARS = 128
CONFIRMATION_MAX_CHARS = 256

# Reports without an apply are pruned after this long; reports that an apply used are kept for audit.
REPORT_RETENTION_HOURS_DEFAULT = 168
# The report lists unowned names up to this many (counts are always complete).
REPORT_UNOWNED_NAMES_SHOWN_MAX = 200
