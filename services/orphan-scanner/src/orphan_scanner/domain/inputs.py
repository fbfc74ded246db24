"""Operator input of `sense-orphan apply`, validated before anything is read or deleted.

The confirmation text is derived from the report (scan id and candidate count), so it can only be typed
for the report the operator actually read. Validation errors carry a stable code, never the input.
"""

from __future__ import annotations

import re
import uuid

from orphan_scanner.domain import limits
from orphan_scanner.domain.errors import InvalidScanInput

ACTOR_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._:@-]{{0,{limits.ACTOR_MAX_CHARS - 1}}}")


def validate_actor(value: str) -> str:
    if ACTOR_PATTERN.fullmatch(value) is None:
        raise InvalidScanInput("actor")
    return value


def parse_scan_id(value: str) -> uuid.UUID:
    """A scan id is the canonical lower-case text of a UUID, exactly as the report printed it."""
    try:
        scan_id = uuid.UUID(value)
    except ValueError:
        raise InvalidScanInput("scan_id") from None
    if str(scan_id) != value:
        raise InvalidScanInput("scan_id")
    return scan_id


def validate_confirmation(value: str) -> str:
    if not value or len(value) > limits.CONFIRMATION_MAX_CHARS or not value.isprintable():
        raise InvalidScanInput("confirmation")
    return value


def confirmation_text(scan_id: uuid.UUID, report_candidates: int) -> str:
    """The exact text `apply --confirm` must repeat for this report."""
    noun = "path" if report_candidates == 1 else "paths"
    return f"delete {report_candidates} owned_stale {noun} of scan {scan_id}"


APPLY_PROGRAM = "sense-orphan"


def apply_command(scan_id: uuid.UUID, report_candidates: int) -> str:
    """The exact apply command an operator runs for this report (the actor left to fill in)."""
    confirm = confirmation_text(scan_id, report_candidates)
    return f"{APPLY_PROGRAM} apply --scan-id {scan_id} --actor <your-name> --confirm '{confirm}'"
