"""Read API of scan reports: ``GET /v1/reports`` (newest first, keyset-paged), ``GET /v1/reports/latest``
(the newest complete one) and ``GET /v1/reports/{scan_id}``. Read-only: deletion stays with the
``sense-orphan apply`` CLI, whose exact command line each report carries.

Identity: an access token of the OpenID provider (audience ``orphan-scanner``) with the permission
``orphan:read``, checked by ``AccessTokenCaller`` with the verifier the entrypoint put on the app
(``use_access_tokens``).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from orphan_scanner.domain import limits
from orphan_scanner.domain.gate import FleetGateInput, check_fleet_gate, ratio_allows, report_expired
from orphan_scanner.domain.inputs import apply_command, confirmation_text
from orphan_scanner.domain.records import ReportHead, ReportPosition, ReportSummary, StoredReport
from orphan_scanner.entrypoints.dependencies import UseCases
from yovision_platform import web
from yovision_platform.web import AccessTokenCaller, Problem

READ_PERMISSION = "orphan:read"
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_CURSOR_CHARS = 96


class Counts(BaseModel):
    observed: int
    in_use: int
    owned_stale: int
    unowned: int


class ServerPathOut(BaseModel):
    media_server_id: str
    path_name: str


class Candidate(ServerPathOut):
    last_device_id: uuid.UUID


class ServerGate(BaseModel):
    """One MediaMTX server's ratio: its candidates against its own configured paths."""

    media_server_id: str
    candidates: int
    total: int
    ratio_left: int = Field(description="candidates * 100")
    ratio_right: int = Field(description="total * 10")
    ratio_ok: bool


class Gate(BaseModel):
    """The safety gate over the report's own numbers, as `apply` would compute it right now if nothing
    changed since the scan: integer arithmetic, every condition shown. The ratio holds per server
    (`servers`); `candidates`, `total` and the ratio fields here are the sums over the fleet."""

    candidates: int
    total: int
    ratio_left: int = Field(description="candidates * 100")
    ratio_right: int = Field(description="total * 10")
    ratio_ok: bool = Field(description="the ratio holds on every server")
    min_candidates: int
    max_candidates: int
    count_ok: bool
    expired: bool
    allowed: bool
    reason_code: str | None
    media_server_id: str | None = Field(description="the server whose gate failed, when one did")
    servers: list[ServerGate]


class ReportOut(BaseModel):
    scan_id: uuid.UUID
    trigger: str
    status: str = Field(description="complete | failed")
    error_code: str | None
    created_at: datetime
    expires_at: datetime
    age_ms: int
    seconds_left: int = Field(description="Seconds before the scan id expires for apply (0: expired).")
    counts: Counts | None
    candidates: list[Candidate]
    unowned: list[ServerPathOut] = Field(
        description=f"At most {limits.REPORT_UNOWNED_NAMES_SHOWN_MAX} paths."
    )
    unowned_truncated: bool
    gate: Gate | None
    confirm: str | None = Field(description="The exact text `apply --confirm` must repeat.")
    apply_command: str | None = Field(description="The command to run; the console never deletes.")


@dataclass(frozen=True)
class ReportSummaryOut(ReportHead):
    observed: int | None
    owned_stale: int | None
    unowned: int | None


class ReportPage(BaseModel):
    items: list[ReportSummaryOut]
    next_cursor: str | None


def encode_cursor(position: ReportPosition) -> str:
    return web.encode_cursor(position.created_at, position.scan_id)


def decode_cursor(cursor: str) -> ReportPosition:
    """`paging.InvalidCursor` (400 invalid_cursor) for any text `encode_cursor` did not make."""
    return ReportPosition(*web.decode_cursor(cursor, uuid.UUID))


def _server_gate(server: str, candidates: int, total: int) -> ServerGate:
    return ServerGate(
        media_server_id=server,
        candidates=candidates,
        total=total,
        ratio_left=candidates * limits.DELETE_RATIO_DENOMINATOR,
        ratio_right=total * limits.DELETE_RATIO_NUMERATOR,
        ratio_ok=ratio_allows(candidates, total),
    )


def gate_of(report: StoredReport) -> Gate:
    candidates, total = len(report.candidates), report.observed_total or 0
    block = check_fleet_gate(
        FleetGateInput(
            report_candidates=set(report.candidates),
            current_candidates=set(report.candidates),
            current_totals=report.server_totals,
            report_age_ms=report.age_ms,
        )
    )
    per_server = Counter(path.media_server_id for path in report.candidates)
    servers = [
        _server_gate(server, per_server[server], server_total)
        for server, server_total in sorted(report.server_totals.items())
    ]
    return Gate(
        candidates=candidates,
        total=total,
        ratio_left=candidates * limits.DELETE_RATIO_DENOMINATOR,
        ratio_right=total * limits.DELETE_RATIO_NUMERATOR,
        ratio_ok=all(server.ratio_ok for server in servers if server.candidates),
        min_candidates=limits.APPLY_MIN_CANDIDATES,
        max_candidates=limits.APPLY_MAX_CANDIDATES,
        count_ok=limits.APPLY_MIN_CANDIDATES <= candidates <= limits.APPLY_MAX_CANDIDATES,
        expired=report_expired(report.age_ms),
        allowed=block is None,
        reason_code=block.reason.value if block else None,
        media_server_id=block.media_server_id if block else None,
        servers=servers,
    )


def report_out(report: StoredReport) -> ReportOut:
    complete = report.status == "complete"
    left_ms = max(0, limits.REPORT_VALIDITY_MS - report.age_ms)
    candidates = len(report.candidates)
    counts = (
        Counts(
            observed=report.observed_total or 0,
            in_use=report.in_use_count or 0,
            owned_stale=report.owned_stale_count or 0,
            unowned=report.unowned_count or 0,
        )
        if complete
        else None
    )
    return ReportOut(
        scan_id=report.scan_id,
        trigger=report.trigger,
        status=report.status,
        error_code=report.error_code,
        created_at=report.created_at,
        expires_at=report.expires_at,
        age_ms=report.age_ms,
        seconds_left=left_ms // 1000,
        counts=counts,
        candidates=[
            Candidate(media_server_id=p.media_server_id, path_name=p.path_name, last_device_id=d)
            for p, d in sorted(report.candidates.items())
        ],
        unowned=[
            ServerPathOut(media_server_id=p.media_server_id, path_name=p.path_name)
            for p in report.unowned[: limits.REPORT_UNOWNED_NAMES_SHOWN_MAX]
        ],
        unowned_truncated=len(report.unowned) > limits.REPORT_UNOWNED_NAMES_SHOWN_MAX,
        gate=gate_of(report) if complete else None,
        confirm=confirmation_text(report.scan_id, candidates) if complete else None,
        apply_command=apply_command(report.scan_id, candidates) if complete else None,
    )


def _summary(row: ReportSummary) -> ReportSummaryOut:
    return ReportSummaryOut(
        scan_id=row.scan_id,
        trigger=row.trigger,
        status=row.status,
        error_code=row.error_code,
        created_at=row.created_at,
        expires_at=row.expires_at,
        observed=row.observed_total,
        owned_stale=row.owned_stale_count,
        unowned=row.unowned_count,
    )


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "unauthorized"},
    403: {"model": Problem, "description": f"forbidden: the token lacks `{READ_PERMISSION}`"},
}


# The caller's token is checked with the app's verifier (`use_access_tokens`).
router = APIRouter(prefix="/v1/reports", tags=["reports"], responses=ERRORS)


@router.get("", response_model=ReportPage, responses={400: {"description": "invalid_cursor"}})
async def list_reports(
    caller: AccessTokenCaller,
    use_cases: UseCases,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, web.cursor_query(uuid.UUID, max_length=MAX_CURSOR_CHARS)] = None,
) -> ReportPage:
    caller.require(READ_PERMISSION)
    listing = await use_cases.reports.page(limit, decode_cursor(cursor) if cursor is not None else None)
    return ReportPage(
        items=[_summary(r) for r in listing.items],
        next_cursor=encode_cursor(listing.next_after) if listing.next_after else None,
    )


@router.get(
    "/latest",
    response_model=ReportOut,
    responses={404: {"model": Problem, "description": "not_found: no complete report yet"}},
)
async def latest_report(caller: AccessTokenCaller, use_cases: UseCases) -> ReportOut:
    caller.require(READ_PERMISSION)
    return report_out(await use_cases.reports.latest())


@router.get(
    "/{scan_id}",
    response_model=ReportOut,
    responses={404: {"model": Problem, "description": "not_found"}},
)
async def get_report(caller: AccessTokenCaller, use_cases: UseCases, scan_id: uuid.UUID) -> ReportOut:
    caller.require(READ_PERMISSION)
    return report_out(await use_cases.reports.get(scan_id))
