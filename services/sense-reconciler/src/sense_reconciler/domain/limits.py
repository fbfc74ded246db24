"""Every SPEC limit of sense-reconciler in one place, each with its unit in the name."""

from __future__ import annotations

from yovision_platform.mediamtx import MANAGED_PATH_NAME_MAX_CHARS

# Sites: a per-site business limit on *enabled* video devices; never an array or batch size.
SITE_MAX_VIDEO_CHANNELS_DEFAULT = 16
SITE_MAX_VIDEO_CHANNELS_MIN = 1
SITE_MAX_VIDEO_CHANNELS_MAX = 128

# Input shapes of the Control API.
ID_MAX_CHARS = 64
DEVICE_NAME_MAX_CHARS = 128
PATH_NAME_MAX_CHARS = MANAGED_PATH_NAME_MAX_CHARS
SOURCE_URI_MAX_CHARS = 2048
ACTOR_MAX_CHARS = 128
SET_DESIRED_STATE_BATCH_MAX_ITEMS = 128
LIST_PAGE_SIZE_DEFAULT = 50
LIST_PAGE_SIZE_MAX = 200

# Reconcile loop.
LEASE_SECONDS_DEFAULT = 30.0
OPERATION_DEADLINE_SECONDS_DEFAULT = 20.0
CLAIM_BATCH_MAX_ITEMS = 128
CLAIM_BATCH_DEFAULT_ITEMS = 32
# Items of one writer in flight at once: while one holds its server's lane (MediaMTX calls), the next renews
# its lease and loads its device, and the previous records its result, so the server never waits on our
# database work. MediaMTX still gets one call at a time per server (ServerLanes).
ITEMS_IN_FLIGHT_PER_WRITER = 3
SCAN_INTERVAL_SECONDS_DEFAULT = 5.0
RETRY_BACKOFF_BASE_SECONDS = 1.0
RETRY_BACKOFF_CAP_SECONDS = 300.0
# Converged devices are re-verified against MediaMTX this long after their last result (0: never).
DRIFT_CHECK_SECONDS_DEFAULT = 600.0
DRIFT_CHECK_SECONDS_MAX = 86_400.0
