"""The user's watchers (`Watchers` use cases) on the fakes: the per-user cap at its boundary, validation and
the SSRF preflight before any write, updates that keep masked secrets and the stored body, the check-now
spacing and status rules, test-now previews, paging, and `not_found` for everything of another user."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any

import pytest

from signal_watcher.adapters.memory import MemoryProbe, MemorySignalDatabase
from signal_watcher.domain import errors
from signal_watcher.domain.masking import MASK
from signal_watcher.domain.model import INTERVAL_MAX_MINUTES, CompareMode, Header, Method, Status, WatcherSpec
from signal_watcher.domain.ssrf import STRICT_GUARD, parse_networks
from signal_watcher.service_layer.checks import CheckRunner
from signal_watcher.service_layer.watchers import Watchers
from tests.support.signal_watcher_fixtures import use_cases_on
from tests.unit.signal_watcher.conftest import NAMES, Wakes, check_now, checks_of, url
from yovision_platform.errors import ServiceError

MAX_PER_USER = 3
SECRET = Header("Authorization", "Bearer s3cret")
SPACING = errors.CHECK_NOW_MIN_SPACING_SECONDS
DRAFT = WatcherSpec(
    name="w",
    agent_id="agent-1",
    url=url("/text"),
    method=Method.POST,
    headers=(SECRET, Header("Accept", "json")),
    body="p4yload",
    interval_minutes=5000,
    compare_mode=CompareMode.HASH,
    json_path=None,
    prompt_template="{diff}",
)


@pytest.fixture
def watchers(database: MemorySignalDatabase, probe: MemoryProbe, wakes: Wakes) -> Watchers:
    return use_cases_on(database, probe, max_watchers_per_user=MAX_PER_USER, check_requested=wakes).watchers


def draft(**changes: Any) -> WatcherSpec:
    return replace(DRAFT, **changes)


def refusal(error: pytest.ExceptionInfo[ServiceError]) -> tuple[int, str]:
    return error.value.status, error.value.code


async def test_a_new_watcher_keeps_its_secrets_and_gets_a_clamped_interval(watchers: Watchers) -> None:
    created = await watchers.create("alice", DRAFT)
    assert created.spec.headers == DRAFT.headers and created.spec.body == "p4yload"
    assert created.spec.interval_minutes == INTERVAL_MAX_MINUTES and created.status is Status.ACTIVE
    assert await watchers.get("alice", created.id) == created


@pytest.mark.parametrize(
    ("existing", "allowed"), [(MAX_PER_USER - 2, True), (MAX_PER_USER - 1, True), (MAX_PER_USER, False)]
)
async def test_the_per_user_cap_holds_at_its_boundary(
    watchers: Watchers, existing: int, allowed: bool
) -> None:
    for _ in range(existing):
        await watchers.create("alice", DRAFT)
    if allowed:
        await watchers.create("alice", DRAFT)
    else:
        with pytest.raises(errors.LimitReached) as refused:
            await watchers.create("alice", DRAFT)
        assert refusal(refused) == (409, "watcher_limit_reached")
    await watchers.create("bob", DRAFT)  # the cap is per user


@pytest.mark.parametrize(
    ("changes", "status", "code"),
    [
        ({"url": "http://private.example.com/"}, 403, "ssrf_blocked_address"),
        ({"url": "http://127.1/"}, 403, "ssrf_ambiguous_ip"),
        ({"url": "http://db.internal/"}, 403, "ssrf_blocked_name"),
        ({"url": "ftp://example.com/"}, 422, "url_scheme_not_allowed"),
        ({"url": "http://example.com:65536/"}, 422, "url_port_invalid"),
        ({"headers": (Header("Host", "x"),)}, 422, "forbidden_header"),
        ({"compare_mode": CompareMode.JSON_FIELD, "json_path": "a..b"}, 422, "invalid_json_path"),
        ({"method": Method.GET}, 422, "body_requires_post"),
        ({"name": " "}, 422, "invalid_name"),
    ],
)
async def test_a_refused_definition_writes_nothing(
    watchers: Watchers, database: MemorySignalDatabase, changes: dict[str, Any], status: int, code: str
) -> None:
    with pytest.raises(errors.ValidationFailed) as refused:
        await watchers.create("alice", draft(**changes))
    assert refusal(refused) == (status, code)  # type: ignore[arg-type]
    assert isinstance(refused.value, errors.TargetForbidden) is (status == 403)
    assert database.tables.watchers == {}


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ("https://93.184.216.34/", "probe_network_confined"),  # a public literal
        (url("/text"), "probe_network_confined"),  # a public name (the fake's DNS)
        ("http://private.example.com/", "ssrf_blocked_address"),  # blocked first, whatever the confinement
    ],
)
async def test_a_confined_probe_refuses_create_and_update_outside_its_networks(
    database: MemorySignalDatabase, target: str, code: str
) -> None:
    probe = MemoryProbe(guard=STRICT_GUARD.confined_to(parse_networks("127.0.0.0/8")), names=NAMES)
    watchers = use_cases_on(database, probe, max_watchers_per_user=MAX_PER_USER).watchers
    with pytest.raises(errors.TargetForbidden) as refused:
        await watchers.create("alice", draft(url=target))
    assert refusal(refused) == (403, code)  # type: ignore[arg-type]
    assert database.tables.watchers == {} and probe.requests == {}


async def test_a_name_that_does_not_resolve_yet_is_accepted(watchers: Watchers) -> None:
    created = await watchers.create("alice", draft(url="https://not-yet.example.com/"))
    assert created.spec.url == "https://not-yet.example.com/"


async def test_everything_of_another_user_is_not_found(
    watchers: Watchers, database: MemorySignalDatabase
) -> None:
    mine = await watchers.create("alice", DRAFT)
    calls = [
        watchers.get("bob", mine.id),
        watchers.update("bob", mine.id, DRAFT, body_sent=True),
        watchers.delete("bob", mine.id),
        watchers.set_status("bob", mine.id, Status.PAUSED),
        watchers.request_check("bob", mine.id),
        watchers.preview("bob", mine.id),
        watchers.preview_definition("bob", DRAFT, edit_of=mine.id),
        watchers.list_checks("bob", mine.id, limit=10, offset=0, before=None),
    ]
    for call in calls:
        with pytest.raises(errors.WatcherNotFound) as refused:
            await call
        assert refusal(refused) == (404, "not_found")
    assert (await watchers.list_own("bob", limit=10, offset=0, after=None)).items == []
    assert await watchers.get("alice", mine.id) == mine


async def test_an_update_keeps_masked_secrets_and_a_left_out_body(watchers: Watchers) -> None:
    created = await watchers.create("alice", DRAFT)
    masked = (Header("authorization", MASK), Header("Accept", "json"), Header("X-Api-Key", MASK))
    renamed = draft(name="renamed", headers=masked, body=None)
    updated = await watchers.update("alice", created.id, renamed, body_sent=False)
    assert updated.spec.name == "renamed" and updated.spec.body == "p4yload"
    # a masked value keeps the stored one (key in any case); a masked header never stored stays as sent
    assert updated.spec.headers == (Header("authorization", "Bearer s3cret"), masked[1], masked[2])


async def test_an_update_away_from_post_must_drop_the_stored_body(watchers: Watchers) -> None:
    created = await watchers.create("alice", DRAFT)
    with pytest.raises(errors.StoredBodyNeedsPost) as refused:
        await watchers.update("alice", created.id, draft(method=Method.GET, body=None), body_sent=False)
    assert refusal(refused) == (409, "stored_body_requires_post")
    dropped = await watchers.update("alice", created.id, draft(method=Method.GET, body=None), body_sent=True)
    assert dropped.spec.body is None
    with pytest.raises(errors.ValidationFailed) as sent:
        await watchers.update("alice", created.id, draft(method=Method.GET, body="x"), body_sent=True)
    assert refusal(sent) == (422, "body_requires_post")  # type: ignore[arg-type]


async def test_only_probe_and_judging_edits_reset_the_baseline(
    watchers: Watchers, database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner
) -> None:
    probe.answer(url("/text"), body=b"v1")
    created = await watchers.create("alice", DRAFT)
    await check_now(database, runner, created.id)
    other_text = draft(name="renamed", interval_minutes=7, prompt_template="x{diff}")
    kept = await watchers.update("alice", created.id, other_text, body_sent=True)
    assert kept.last_value_hash is not None
    reset = await watchers.update("alice", created.id, draft(body="other"), body_sent=True)
    assert reset.last_value_hash is None and reset.spec.body == "other"


async def test_the_url_is_checked_again_only_when_it_changes(
    watchers: Watchers, database: MemorySignalDatabase
) -> None:
    created = await watchers.create("alice", draft(url="https://later-private.example.com/"))
    blocked = MemoryProbe(
        names={"later-private.example.com": ["10.0.0.7"], "private.example.com": ["10.1.2.3"]}
    )
    editing = use_cases_on(database, blocked, max_watchers_per_user=MAX_PER_USER).watchers
    renamed = await editing.update(
        "alice", created.id, draft(url=created.spec.url, name="renamed"), body_sent=True
    )
    assert renamed.spec.name == "renamed"  # the name is not resolved again
    with pytest.raises(errors.TargetForbidden) as refused:
        await editing.update("alice", created.id, draft(url="https://private.example.com/"), body_sent=True)
    assert refusal(refused) == (403, "ssrf_blocked_address")  # type: ignore[arg-type]
    assert (await watchers.get("alice", created.id)).spec.url == created.spec.url


async def test_a_deleted_watcher_is_not_found_afterwards(watchers: Watchers) -> None:
    created = await watchers.create("alice", DRAFT)
    await watchers.delete("alice", created.id)
    with pytest.raises(errors.WatcherNotFound):
        await watchers.delete("alice", created.id)
    with pytest.raises(errors.WatcherNotFound):
        await watchers.get("alice", created.id)


async def test_reenabling_a_disabled_watcher_resets_failures_and_baseline(
    watchers: Watchers, database: MemorySignalDatabase
) -> None:
    created = await watchers.create("alice", DRAFT)
    row = database.tables.watchers[created.id]
    disabled = replace(row.record, status=Status.DISABLED, consecutive_failures=5, last_value_hash="h")
    database.tables.watchers[created.id] = replace(row, record=disabled)
    enabled = await watchers.set_status("alice", created.id, Status.ACTIVE)
    assert (enabled.status, enabled.consecutive_failures, enabled.last_value_hash) == (Status.ACTIVE, 0, None)
    paused = await watchers.set_status("alice", created.id, Status.PAUSED)
    assert paused.status is Status.PAUSED


@pytest.mark.parametrize(
    ("seconds_later", "allowed"),
    [
        (SPACING + 1, True),
        (SPACING, True),
        (SPACING - 0.01, False),
    ],
)
async def test_check_requests_are_spaced_by_the_stores_clock(
    watchers: Watchers,
    database: MemorySignalDatabase,
    probe: MemoryProbe,
    runner: CheckRunner,
    wakes: Wakes,
    seconds_later: float,
    allowed: bool,
) -> None:
    probe.answer(url("/text"), body=b"v1")
    created = await watchers.create("alice", DRAFT)
    assert (await watchers.request_check("alice", created.id)).next_check_at <= database.clock.now()
    assert wakes.count == 1  # never checked: at once
    await check_now(database, runner, created.id)
    database.clock.advance(seconds_later)
    if allowed:
        requested = await watchers.request_check("alice", created.id)
        assert requested.next_check_at <= database.clock.now() and wakes.count == 2
        return
    with pytest.raises(errors.CheckTooSoon) as refused:
        await watchers.request_check("alice", created.id)
    assert refusal(refused) == (429, "check_too_soon")
    assert refused.value.response_headers() == {"Retry-After": str(SPACING)}
    assert wakes.count == 1


async def test_only_an_active_watcher_is_checked_on_request(watchers: Watchers, wakes: Wakes) -> None:
    created = await watchers.create("alice", DRAFT)
    await watchers.set_status("alice", created.id, Status.PAUSED)
    with pytest.raises(errors.NotActive) as refused:
        await watchers.request_check("alice", created.id)
    assert refusal(refused) == (409, "watcher_not_active") and wakes.count == 0


async def test_test_now_previews_without_writing_or_publishing(
    watchers: Watchers, database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner
) -> None:
    probe.answer(url("/text"), body=b"hello")
    created = await watchers.create("alice", draft(method=Method.GET, body=None))
    preview = await watchers.preview("alice", created.id)
    assert preview.result.judged is not None and preview.result.http_status == 200
    assert (preview.result.sample, preview.is_baseline, preview.would_change) == ("hello", True, False)
    assert await watchers.get("alice", created.id) == created
    assert await checks_of(database, created.id) == [] and database.committed == []
    await check_now(database, runner, created.id)
    probe.answer(url("/text"), body=b"changed")
    changed = await watchers.preview("alice", created.id)
    assert (changed.is_baseline, changed.would_change) == (False, True)
    probe.answer(url("/text"), status=302)
    failed = await watchers.preview("alice", created.id)
    assert (failed.result.judged, failed.result.error_code, failed.would_change) == (None, "redirect", False)


@pytest.mark.parametrize(("count", "pages"), [(2, [2]), (3, [3]), (4, [3, 1]), (7, [3, 3, 1])])
async def test_pages_end_exactly_when_the_rows_do(
    database: MemorySignalDatabase, probe: MemoryProbe, count: int, pages: list[int]
) -> None:
    watchers = use_cases_on(database, probe, max_watchers_per_user=100).watchers
    ids = [(await watchers.create("alice", DRAFT)).id for _ in range(count)]
    walked: list[list[uuid.UUID]] = []
    after = None
    while True:
        page = await watchers.list_own("alice", limit=3, offset=0, after=after)
        walked.append([r.id for r in page.items])
        if page.next_position is None:
            break
        after = page.next_position
        assert after == (page.items[-1].created_at, page.items[-1].id)
    assert [len(p) for p in walked] == pages and [i for p in walked for i in p] == ids
    everyone = await watchers.list_all(limit=count, offset=0, after=None)
    assert everyone.next_position is None and len(everyone.items) == count


async def test_an_unsaved_definition_is_probed_and_judged_once_and_nothing_is_written(
    watchers: Watchers, database: MemorySignalDatabase, probe: MemoryProbe
) -> None:
    probe.answer(url("/json"), body=b'{"item": {"price": 7}}')
    definition = draft(url=url("/json"), method=Method.GET, body=None)
    preview = await watchers.preview_definition(
        "alice", replace(definition, compare_mode=CompareMode.JSON_FIELD, json_path="$.item.price")
    )
    assert preview.result.judged is not None and preview.result.judged.excerpt == "7"
    assert (preview.result.http_status, preview.is_baseline, preview.would_change) == (200, True, False)
    assert probe.requests[url("/json")] == 1
    assert database.tables.watchers == {} and database.tables.checks == {} and database.committed == []
    probe.answer(url("/json"), status=302)
    failed = await watchers.preview_definition("alice", definition)
    assert (failed.result.error_code, failed.is_baseline, failed.would_change) == ("redirect", False, False)


@pytest.mark.parametrize(
    ("changes", "status", "code"),
    [
        ({"url": "http://private.example.com/"}, 403, "ssrf_blocked_address"),
        ({"url": "http://127.1/"}, 403, "ssrf_ambiguous_ip"),
        ({"url": "http://example.com:65536/"}, 422, "url_port_invalid"),
        ({"compare_mode": CompareMode.JSON_FIELD, "json_path": "$..price"}, 422, "invalid_json_path"),
        ({"method": Method.GET}, 422, "body_requires_post"),
        ({"name": " "}, 422, "invalid_name"),
    ],
)
async def test_an_unsaved_definition_is_refused_as_create_refuses_it_before_any_probe(
    watchers: Watchers, probe: MemoryProbe, changes: dict[str, Any], status: int, code: str
) -> None:
    probe.echo(url("/text"))
    with pytest.raises(errors.ValidationFailed) as refused:
        await watchers.preview_definition("alice", draft(**changes))
    assert refusal(refused) == (status, code)  # type: ignore[arg-type]
    assert probe.requests == {}


async def test_a_definition_outside_the_confinement_is_refused_before_any_probe(
    database: MemorySignalDatabase,
) -> None:
    probe = MemoryProbe(guard=STRICT_GUARD.confined_to(parse_networks("127.0.0.0/8")), names=NAMES)
    probe.echo(url("/text"))
    watchers = use_cases_on(database, probe, max_watchers_per_user=MAX_PER_USER).watchers
    for target in (url("/text"), "https://93.184.216.34/"):
        with pytest.raises(errors.NetworkConfined):
            await watchers.preview_definition("alice", draft(url=target))
    assert probe.requests == {}


async def test_an_edit_is_tested_with_the_stored_secrets_and_against_the_stored_baseline(
    watchers: Watchers, database: MemorySignalDatabase, probe: MemoryProbe, runner: CheckRunner
) -> None:
    probe.echo(url("/text"))
    created = await watchers.create("alice", DRAFT)
    await check_now(database, runner, created.id)
    before = await watchers.get("alice", created.id)
    masked = (Header("Authorization", MASK), Header("Accept", "json"))
    renamed = draft(name="renamed", headers=masked, body=None)
    same = await watchers.preview_definition("alice", renamed, edit_of=created.id, body_sent=False)
    assert same.result.sample is not None
    echoed = json.loads(same.result.sample)  # the echo: what the probe sent
    assert echoed["headers"]["authorization"] == "Bearer s3cret" and echoed["body"] == "p4yload"
    assert (same.is_baseline, same.would_change) == (False, False)  # a name edit keeps the baseline
    other_body = draft(headers=masked, body="other")
    changed_body = await watchers.preview_definition("alice", other_body, edit_of=created.id)
    assert (changed_body.is_baseline, changed_body.would_change) == (True, False)  # the edit resets it
    assert json.loads(changed_body.result.sample or "")["body"] == "other"
    with pytest.raises(errors.StoredBodyNeedsPost):
        await watchers.preview_definition(
            "alice", draft(method=Method.GET, body=None), edit_of=created.id, body_sent=False
        )
    unsent = await watchers.preview_definition("alice", renamed)  # not an edit: `******` is sent as is
    assert json.loads(unsent.result.sample or "")["headers"]["authorization"] == MASK
    assert await watchers.get("alice", created.id) == before  # nothing written
    assert len(await checks_of(database, created.id)) == 1 and len(database.committed) == 0
