"""Every refusal orphan-scanner answers, each a `ServiceError` with a stable code and the HTTP status an API
answers it with (`yovision_platform.web`). The `sense-orphan` CLI prints the same codes in its JSON and
picks its exit code by family (`InvalidScanInput` 2, `ApplyRefused` and `ScanLeaseBusy` 3, `ScanFailed` 1).

    InvalidScanInput          invalid_actor | invalid_scan_id | invalid_confirmation      422  (CLI input)
    ApplyRefused                                                                          (before any gate)
    ├── ScanNotFound      scan_not_found                                             404
    ├── ScanNotUsable     scan_not_usable                                            409
    └── ApplyInProgress   apply_in_progress                                          409
    ScanError                                                                             (`report`)
    ├── ScanLeaseBusy     scan_lease_busy                                            409
    └── ScanFailed        lease_lost | mediamtx_* (the enumeration's code)           503
    ReportNotFound        not_found                                                  404  (read API)

The read API's `400 invalid_cursor` is the platform's `yovision_platform.web.InvalidCursor`.
"""

from __future__ import annotations

from yovision_platform.errors import ServiceError

__all__ = [
    "ApplyInProgress",
    "ApplyRefused",
    "InvalidScanInput",
    "ReportNotFound",
    "ScanError",
    "ScanFailed",
    "ScanLeaseBusy",
    "ScanNotFound",
    "ScanNotUsable",
]


class InvalidScanInput(ServiceError):
    """`sense-orphan apply` input of the wrong shape; the code names the field, never its value."""

    status = 422

    def __init__(self, field: str) -> None:
        self.field = field
        super().__init__(f"invalid_{field}")


class ApplyRefused(ServiceError):
    """An apply refused before any gate: nothing is recorded, nothing published, nothing deleted."""

    code = "apply_refused"
    status = 409


class ScanNotFound(ApplyRefused):
    """No report has this scan id."""

    code = "scan_not_found"
    status = 404


class ScanNotUsable(ApplyRefused):
    """The scan failed: run a new report."""

    code = "scan_not_usable"


class ApplyInProgress(ApplyRefused):
    """Another apply is running (one at a time)."""

    code = "apply_in_progress"


class ScanError(ServiceError):
    """A `report` (manual scan) that produced no usable report."""

    code = "scan_error"
    status = 503


class ScanLeaseBusy(ScanError):
    """Another scan held the scan lease for longer than `report` waits."""

    code = "scan_lease_busy"
    status = 409


class ScanFailed(ScanError):
    """The scan ran and failed: `lease_lost`, or the MediaMTX enumeration's `mediamtx_*` code."""

    @classmethod
    def lease_lost(cls) -> ScanFailed:
        return cls("lease_lost", "the scan lease was lost; no report")

    @classmethod
    def enumeration(cls, mediamtx_code: str) -> ScanFailed:
        return cls(mediamtx_code, "MediaMTX enumeration failed")


class ReportNotFound(ServiceError):
    """No report has this scan id, or no complete one exists yet."""

    code = "not_found"
    status = 404
