"""`sense-orphan`: the operator's orphan commands. JSON on stdout, logs (redacted JSON) on stderr.

    sense-orphan report
    sense-orphan apply --scan-id ID --actor NAME --confirm "<exact text shown by report>"

Exit codes: 0 done; 1 scan failed (MediaMTX enumeration, lost lease) or nothing usable; 2 invalid input
or configuration; 3 refused (unknown or failed scan id, another apply running, database not ready);
4 blocked by the safety gate (nothing deleted); 5 partial (some deletes failed: re-run apply to retry them).
There is no force flag, no environment variable and no other route around the gate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from orphan_scanner.domain import limits
from orphan_scanner.domain.classify import PathClass, ServerPath
from orphan_scanner.domain.errors import ApplyRefused, InvalidScanInput, ScanError, ScanLeaseBusy
from orphan_scanner.domain.gate import FleetGateInput, check_fleet_gate
from orphan_scanner.domain.inputs import (
    APPLY_PROGRAM,
    apply_command,
    confirmation_text,
    parse_scan_id,
    validate_actor,
    validate_confirmation,
)
from orphan_scanner.entrypoints.main import SPEC, build
from orphan_scanner.service_layer.apply import ApplyResult, ApplyStatus
from orphan_scanner.service_layer.metrics import ScanTrigger
from orphan_scanner.service_layer.scanner import ScanReport
from orphan_scanner.settings import OrphanScannerSettings
from yovision_platform.errors import ConfigError, PlatformError
from yovision_platform.observability import configure_logging
from yovision_platform.settings import load_settings
from yovision_platform.web import checked_pool

PROG = APPLY_PROGRAM
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2
EXIT_REFUSED = 3
EXIT_BLOCKED = 4
EXIT_PARTIAL = 5


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Report MediaMTX paths no Sense device claims, and remove the safe ones through a gate.",
        epilog="Settings: the orphan-scanner service's ORPHAN_* environment. Output: JSON on stdout.",
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{report,apply}")
    commands.add_parser(
        "report",
        help="scan now (read-only) and print a redacted summary with a scan id valid for 15 minutes",
        description="Scan MediaMTX now under the scan lease, classify every path in_use / owned_stale / "
        "unowned, store the report and print it. Deletes nothing.",
    )
    apply = commands.add_parser(
        "apply",
        allow_abbrev=False,
        help="delete a report's owned_stale paths that are still stale, if the safety gate allows",
        description="Re-enumerate MediaMTX, bring the ownership projection up to Kafka's end offsets, "
        "re-classify and delete, one by one, the report's candidates that are still owned_stale. Gate: "
        "1..128 candidates, at most 10% of the configured paths, report at most 15 minutes old. Any "
        "failed condition deletes nothing. Re-running with the same scan id is idempotent.",
    )
    apply.add_argument("--scan-id", required=True, help="the scan id printed by `report`")
    apply.add_argument(
        "--actor", required=True, help="who runs this (letters, digits, . _ : @ -; at most 128 characters)"
    )
    apply.add_argument("--confirm", required=True, help="the exact confirmation text printed by `report`")
    return parser


def _emit(document: dict[str, Any]) -> None:
    print(json.dumps(document, indent=2, sort_keys=False))


def _path(path: ServerPath) -> dict[str, str]:
    return {"media_server_id": path.media_server_id, "path_name": path.path_name}


def _counts(counts: dict[PathClass, int]) -> dict[str, int]:
    return {
        "observed": sum(counts.values()),
        "in_use": counts[PathClass.IN_USE],
        "owned_stale": counts[PathClass.OWNED_STALE],
        "unowned": counts[PathClass.UNOWNED],
    }


def report_document(report: ScanReport) -> dict[str, Any]:
    classification = report.classification
    candidates = list(classification.owned_stale)
    unowned = sorted(classification.unowned)
    preview = check_fleet_gate(
        FleetGateInput(
            report_candidates=set(candidates),
            current_candidates=set(candidates),
            current_totals=classification.totals_by_server(),
            report_age_ms=0,
        )
    )
    confirm = confirmation_text(report.scan_id, len(candidates))
    return {
        "scan_id": str(report.scan_id),
        "status": "complete",
        "created_at": report.created_at.isoformat(),
        "expires_at": report.expires_at.isoformat(),
        "valid_for_seconds": limits.REPORT_VALIDITY_MS // 1000,
        "counts": _counts(classification.counts()),
        "servers": {
            server: _counts(counts)
            for server, counts in classification.counts_by_server(report.media_servers).items()
        },
        "candidates": [_path(path) for path in candidates],
        "unowned": [_path(path) for path in unowned[: limits.REPORT_UNOWNED_NAMES_SHOWN_MAX]],
        "unowned_truncated": len(unowned) > limits.REPORT_UNOWNED_NAMES_SHOWN_MAX,
        "gate_preview": {
            "allowed": preview is None,
            "reason_code": preview.reason.value if preview else None,
            "media_server_id": preview.media_server_id if preview else None,
        },
        "confirm": confirm,
        "apply": apply_command(report.scan_id, len(candidates)),
    }


def apply_document(result: ApplyResult) -> dict[str, Any]:
    return {
        "apply_id": str(result.apply_id),
        "scan_id": str(result.scan_id),
        "status": result.status.value,
        "reason_code": result.reason_code.value if result.reason_code else None,
        "blocked_media_server_id": result.blocked_media_server_id,
        "deleted_nothing": result.status is ApplyStatus.BLOCKED,
        "report_candidates": result.report_candidates,
        "current_total": result.current_total,
        "current_candidates": result.current_candidates,
        "counts": result.counts(),
        "items": [
            {**_path(i.path), "outcome": i.outcome, "error_code": i.error_code, "earlier": i.earlier}
            for i in result.items
        ],
    }


APPLY_EXIT = {
    ApplyStatus.COMPLETED: EXIT_OK,
    ApplyStatus.PARTIAL: EXIT_PARTIAL,
    ApplyStatus.BLOCKED: EXIT_BLOCKED,
}


async def _run(
    args: argparse.Namespace, settings: OrphanScannerSettings, apply_input: tuple[uuid.UUID, str, str] | None
) -> int:
    async with checked_pool(SPEC, settings, application=PROG) as (pool, plan):
        components = build(pool, plan.schema, settings, client_id=f"{PROG}-{settings.instance_id}")
        try:
            if apply_input is None:
                try:
                    report = await components.use_cases.scanner.scan(ScanTrigger.MANUAL)
                except ScanError as exc:
                    _emit({"status": "failed", "error_code": exc.code})
                    return EXIT_REFUSED if isinstance(exc, ScanLeaseBusy) else EXIT_FAILED
                assert report is not None
                _emit(report_document(report))
                return EXIT_OK
            scan_id, actor, confirm = apply_input
            try:
                result = await components.use_cases.applier.apply(scan_id, actor=actor, confirmation=confirm)
            except ApplyRefused as exc:
                _emit({"status": "refused", "error_code": exc.code, "deleted_nothing": True})
                return EXIT_REFUSED
            _emit(apply_document(result))
            return APPLY_EXIT[result.status]
        finally:
            await components.fleet.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    apply_input: tuple[uuid.UUID, str, str] | None = None
    if args.command == "apply":
        try:
            apply_input = (
                parse_scan_id(args.scan_id),
                validate_actor(args.actor),
                validate_confirmation(args.confirm),
            )
        except InvalidScanInput as exc:
            _emit({"status": "invalid", "error_code": exc.code, "deleted_nothing": True})
            return EXIT_INVALID
    try:
        settings = load_settings(OrphanScannerSettings)
    except ConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    configure_logging(PROG, settings.instance_id, settings.log_level, stream=sys.stderr)
    try:
        return asyncio.run(_run(args, settings, apply_input))
    except ConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except PlatformError as exc:  # preflight: outdated schema, unsafe role
        _emit({"status": "refused", "error_code": exc.code, "deleted_nothing": True})
        return EXIT_REFUSED
    except asyncpg.PostgresError as exc:  # only the SQLSTATE: server messages may name roles or objects
        _emit({"status": "refused", "error_code": f"database_error_{exc.sqlstate}", "deleted_nothing": True})
        return EXIT_REFUSED
    except (OSError, asyncpg.InterfaceError):
        _emit({"status": "refused", "error_code": "database_unavailable", "deleted_nothing": True})
        return EXIT_REFUSED


def console_main() -> None:
    sys.exit(main())
