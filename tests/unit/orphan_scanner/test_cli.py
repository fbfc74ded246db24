"""`sense-orphan`: argument parser, the report/apply JSON documents, and input refusal before settings."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from orphan_scanner.domain import limits
from orphan_scanner.domain.classify import Classification, ServerPath, classify
from orphan_scanner.domain.gate import BlockReason
from orphan_scanner.domain.inputs import confirmation_text
from orphan_scanner.entrypoints import cli
from orphan_scanner.service_layer.apply import ApplyItemOutcome, ApplyResult, ApplyStatus, Outcome
from orphan_scanner.service_layer.scanner import ScanReport

SCAN_ID = uuid.UUID("3f2b9c4e-8a1d-4e5f-9b7c-0d1e2f3a4b5c")
APPLY_ID = uuid.UUID("11111111-2222-4333-8444-555555555555")
DEV = uuid.UUID("00000000-0000-4000-8000-00000000000a")
CREATED = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)


SERVER = "mtx-a"


def on(name: str, server: str = SERVER) -> ServerPath:
    return ServerPath(server, name)


def listed(*names: str, server: str = SERVER) -> list[dict[str, str]]:
    return [{"media_server_id": server, "path_name": name} for name in names]


def scan_report(classification: Classification, servers: tuple[str, ...] = (SERVER,)) -> ScanReport:
    return ScanReport(SCAN_ID, CREATED, CREATED + timedelta(minutes=15), classification, servers)


def by_hand(in_use: int, stale: int, unowned: int, server: str = SERVER) -> Classification:
    return Classification(
        in_use=frozenset(on(f"use-{i:04d}", server) for i in range(in_use)),
        owned_stale={on(f"stale-{i:04d}", server): DEV for i in range(stale)},
        unowned=frozenset(on(f"unowned-{i:04d}", server) for i in range(unowned)),
    )


# --- parser -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "mentions"),
    [
        (["--help"], ["sense-orphan", "report", "apply"]),
        (["report", "--help"], ["sense-orphan report", "Deletes nothing"]),
        (["apply", "--help"], ["--scan-id", "--actor", "--confirm", "128"]),
    ],
)
def test_help_exits_0_and_mentions_the_options(
    argv: list[str], mentions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        cli._parser().parse_args(argv)
    assert caught.value.code == 0
    out = capsys.readouterr().out
    for word in mentions:
        assert word in out
    assert "--force" not in out


def test_apply_help_shows_the_ratio_as_10_percent(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["apply", "--help"])
    out = capsys.readouterr().out
    assert "10%" in out
    assert "10%%" not in out


APPLY_ARGS = ["apply", "--scan-id", str(SCAN_ID), "--actor", "alice", "--confirm", "x"]


def test_apply_arguments_parse() -> None:
    args = cli._parser().parse_args(APPLY_ARGS)
    assert (args.command, args.scan_id, args.actor, args.confirm) == ("apply", str(SCAN_ID), "alice", "x")


@pytest.mark.parametrize(
    "argv",
    [
        [*APPLY_ARGS, "--force"],
        [*APPLY_ARGS, "--force", "yes"],
        ["report", "--force"],
        ["--force", "report"],
        [*APPLY_ARGS, "--yes"],
        ["apply", "--scan-id", str(SCAN_ID), "--actor", "alice"],
        ["apply", "--scan-id", str(SCAN_ID), "--confirm", "x"],
        ["apply", "--actor", "alice", "--confirm", "x"],
        [],
        ["delete"],
    ],
)
def test_no_force_flag_and_required_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli._parser().parse_args(argv)
    assert caught.value.code == 2
    capsys.readouterr()


# --- main: input refused before settings are loaded ---------------------------------------------------


@pytest.mark.parametrize(
    ("scan_id", "actor", "confirm", "code"),
    [
        ("not-a-uuid", "alice", "x", "invalid_scan_id"),
        (str(SCAN_ID).upper(), "alice", "x", "invalid_scan_id"),
        (str(SCAN_ID), "alice smith", "x", "invalid_actor"),
        (str(SCAN_ID), "a" * 129, "x", "invalid_actor"),
        (str(SCAN_ID), "alice", "", "invalid_confirmation"),
        (str(SCAN_ID), "alice", "x" * 257, "invalid_confirmation"),
        (str(SCAN_ID), "alice", "line\nbreak", "invalid_confirmation"),
        ("not-a-uuid", "bad actor", "", "invalid_scan_id"),  # scan id is checked first
        (str(SCAN_ID), "bad actor", "", "invalid_actor"),  # then the actor
    ],
)
def test_invalid_apply_input_exits_2_before_settings(
    scan_id: str,
    actor: str,
    confirm: str,
    code: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_settings(*args: object, **kwargs: object) -> object:
        raise AssertionError("settings must not be loaded for invalid input")

    monkeypatch.setattr(cli, "load_settings", no_settings)
    rc = cli.main(["apply", "--scan-id", scan_id, "--actor", actor, "--confirm", confirm])
    assert rc == cli.EXIT_INVALID == 2
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document == {"status": "invalid", "error_code": code, "deleted_nothing": True}
    for echoed in ("not-a-uuid", "alice smith", "line\nbreak"):
        assert echoed not in captured.out + captured.err


def test_the_brief_example_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["apply", "--scan-id", "not-a-uuid", "--actor", "alice", "--confirm", "x"])
    assert rc == 2
    assert json.loads(capsys.readouterr().out)["error_code"] == "invalid_scan_id"


def test_exit_codes_are_stable() -> None:
    assert (cli.EXIT_OK, cli.EXIT_FAILED, cli.EXIT_INVALID, cli.EXIT_REFUSED, cli.EXIT_BLOCKED) == (
        0,
        1,
        2,
        3,
        4,
    )
    assert cli.EXIT_PARTIAL == 5
    assert cli.APPLY_EXIT == {ApplyStatus.COMPLETED: 0, ApplyStatus.PARTIAL: 5, ApplyStatus.BLOCKED: 4}


# --- report_document --------------------------------------------------------------------------------


def test_report_document_counts_candidates_and_confirmation() -> None:
    classification = by_hand(in_use=85, stale=10, unowned=5)
    document = cli.report_document(scan_report(classification))
    assert document["scan_id"] == str(SCAN_ID)
    assert document["status"] == "complete"
    assert document["created_at"] == CREATED.isoformat()
    assert document["expires_at"] == (CREATED + timedelta(minutes=15)).isoformat()
    assert document["valid_for_seconds"] == 900
    assert document["counts"] == {"observed": 100, "in_use": 85, "owned_stale": 10, "unowned": 5}
    assert document["servers"] == {SERVER: document["counts"]}
    assert document["candidates"] == listed(*(f"stale-{i:04d}" for i in range(10)))
    assert document["unowned"] == listed(*sorted(f"unowned-{i:04d}" for i in range(5)))
    assert document["unowned_truncated"] is False
    assert document["gate_preview"] == {"allowed": True, "reason_code": None, "media_server_id": None}
    assert document["confirm"] == confirmation_text(SCAN_ID, 10)
    assert document["confirm"] == f"delete 10 owned_stale paths of scan {SCAN_ID}"
    assert document["apply"] == (
        f"sense-orphan apply --scan-id {SCAN_ID} --actor <your-name> --confirm '{document['confirm']}'"
    )
    json.dumps(document)  # serialisable as printed


def test_report_document_candidates_are_sorted_from_a_real_classification() -> None:
    observed = [on(n) for n in ("zeta", "alpha", "mid", "beta", "used", "x-unowned")]
    owners = {on(name): DEV for name in ("zeta", "alpha", "mid", "beta", "used")}
    document = cli.report_document(scan_report(classify(observed, {on("used")}, owners)))
    assert document["candidates"] == listed("alpha", "beta", "mid", "zeta")


def test_report_document_counts_and_gates_each_server_on_its_own() -> None:
    # 1 candidate among 20 paths of mtx-a is fine; 1 among the 5 of mtx-b is 20 %: blocked, naming mtx-b
    big, small = by_hand(19, 1, 0, "mtx-a"), by_hand(4, 1, 0, "mtx-b")
    fleet = Classification(
        big.in_use | small.in_use, {**big.owned_stale, **small.owned_stale}, big.unowned | small.unowned
    )
    document = cli.report_document(scan_report(fleet, ("mtx-a", "mtx-b", "mtx-c")))
    assert document["servers"] == {
        "mtx-a": {"observed": 20, "in_use": 19, "owned_stale": 1, "unowned": 0},
        "mtx-b": {"observed": 5, "in_use": 4, "owned_stale": 1, "unowned": 0},
        "mtx-c": {"observed": 0, "in_use": 0, "owned_stale": 0, "unowned": 0},
    }
    assert document["candidates"] == listed("stale-0000") + listed("stale-0000", server="mtx-b")
    assert document["gate_preview"] == {
        "allowed": False,
        "reason_code": "ratio_exceeded",
        "media_server_id": "mtx-b",
    }


@pytest.mark.parametrize(
    ("in_use", "stale", "unowned", "reason"),
    [
        (89, 11, 0, BlockReason.RATIO_EXCEEDED),
        (90, 10, 0, None),
        (100, 0, 10, BlockReason.NO_CANDIDATES),
        (0, 0, 0, BlockReason.NO_PATHS),
        (1152, 129, 9, BlockReason.TOO_MANY_CANDIDATES),
        (0, 1, 9, None),
        (0, 1, 8, BlockReason.RATIO_EXCEEDED),
    ],
)
def test_report_document_gate_preview(
    in_use: int, stale: int, unowned: int, reason: BlockReason | None
) -> None:
    document = cli.report_document(scan_report(by_hand(in_use, stale, unowned)))
    assert document["gate_preview"]["allowed"] is (reason is None)
    assert document["gate_preview"]["reason_code"] == (None if reason is None else reason.value)


def test_single_candidate_confirmation_is_singular() -> None:
    document = cli.report_document(scan_report(by_hand(in_use=9, stale=1, unowned=0)))
    assert document["confirm"] == f"delete 1 owned_stale path of scan {SCAN_ID}"


@pytest.mark.parametrize(
    ("unowned", "shown", "truncated"),
    [
        (limits.REPORT_UNOWNED_NAMES_SHOWN_MAX - 1, limits.REPORT_UNOWNED_NAMES_SHOWN_MAX - 1, False),
        (limits.REPORT_UNOWNED_NAMES_SHOWN_MAX, limits.REPORT_UNOWNED_NAMES_SHOWN_MAX, False),
        (limits.REPORT_UNOWNED_NAMES_SHOWN_MAX + 1, limits.REPORT_UNOWNED_NAMES_SHOWN_MAX, True),
        (1000, limits.REPORT_UNOWNED_NAMES_SHOWN_MAX, True),
    ],
)
def test_unowned_names_are_capped_but_counted_completely(unowned: int, shown: int, truncated: bool) -> None:
    assert limits.REPORT_UNOWNED_NAMES_SHOWN_MAX == 200
    document = cli.report_document(scan_report(by_hand(in_use=0, stale=0, unowned=unowned)))
    assert document["counts"]["unowned"] == unowned
    assert len(document["unowned"]) == shown
    assert document["unowned"] == listed(*sorted(f"unowned-{i:04d}" for i in range(unowned))[:shown])
    assert document["unowned_truncated"] is truncated


def test_report_document_holds_names_only_never_uris() -> None:
    classification = classify(
        [on("tenant-a-site-1-dev-0001"), on("tenant-a-site-1-dev-0002"), on("legacy-cam")],
        {on("tenant-a-site-1-dev-0001")},
        {on("tenant-a-site-1-dev-0002"): DEV},
    )
    text = json.dumps(cli.report_document(scan_report(classification)))
    assert "rtsp://" not in text
    assert "://" not in text
    assert str(DEV) not in text  # device ids are not printed either


# --- apply_document ---------------------------------------------------------------------------------


def test_apply_document_of_a_partial_run() -> None:
    result = ApplyResult(
        apply_id=APPLY_ID,
        scan_id=SCAN_ID,
        status=ApplyStatus.PARTIAL,
        report_candidates=3,
        current_total=40,
        current_candidates=3,
        items=[
            ApplyItemOutcome(on("a"), Outcome.DELETED.value),
            ApplyItemOutcome(on("b", "mtx-b"), Outcome.FAILED.value, error_code="mediamtx_http_500"),
            ApplyItemOutcome(on("c"), Outcome.DELETED.value, earlier=True),
        ],
    )
    document = cli.apply_document(result)
    assert document == {
        "apply_id": str(APPLY_ID),
        "scan_id": str(SCAN_ID),
        "status": "partial",
        "reason_code": None,
        "blocked_media_server_id": None,
        "deleted_nothing": False,
        "report_candidates": 3,
        "current_total": 40,
        "current_candidates": 3,
        "counts": {"deleted": 1, "failed": 1},
        "items": [
            {**listed("a")[0], "outcome": "deleted", "error_code": None, "earlier": False},
            {
                **listed("b", server="mtx-b")[0],
                "outcome": "failed",
                "error_code": "mediamtx_http_500",
                "earlier": False,
            },
            {**listed("c")[0], "outcome": "deleted", "error_code": None, "earlier": True},
        ],
    }
    json.dumps(document)


def test_apply_document_of_a_blocked_run_says_nothing_was_deleted() -> None:
    result = ApplyResult(
        apply_id=APPLY_ID,
        scan_id=SCAN_ID,
        status=ApplyStatus.BLOCKED,
        reason_code=BlockReason.RATIO_EXCEEDED,
        blocked_media_server_id="mtx-a",
        report_candidates=11,
        current_total=100,
        current_candidates=11,
    )
    document = cli.apply_document(result)
    assert document["status"] == "blocked"
    assert document["reason_code"] == "ratio_exceeded"
    assert document["blocked_media_server_id"] == "mtx-a"
    assert document["deleted_nothing"] is True
    assert document["counts"] == {}
    assert document["items"] == []
