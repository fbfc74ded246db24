"""Classification of configured MediaMTX paths, per (server, path), into in_use / owned_stale / unowned."""

from __future__ import annotations

import uuid

from orphan_scanner.domain.classify import Classification, PathClass, ServerPath, classify

DEV_A = uuid.UUID("00000000-0000-4000-8000-00000000000a")
DEV_B = uuid.UUID("00000000-0000-4000-8000-00000000000b")


def on(name: str, server: str = "mtx-a") -> ServerPath:
    return ServerPath(server, name)


def test_each_class_exactly() -> None:
    result = classify(
        observed=[on("claimed"), on("stale"), on("foreign")],
        claimed={on("claimed")},
        last_owner={on("stale"): DEV_A},
    )
    assert result.in_use == frozenset({on("claimed")})
    assert dict(result.owned_stale) == {on("stale"): DEV_A}
    assert result.unowned == frozenset({on("foreign")})


def test_the_same_name_is_classified_on_each_server_on_its_own() -> None:
    # a site moved from mtx-a to mtx-b: the path is claimed on mtx-b; the copy left on mtx-a is stale there
    result = classify(
        observed=[on("site-1/cam", "mtx-a"), on("site-1/cam", "mtx-b"), on("hand-made", "mtx-b")],
        claimed={on("site-1/cam", "mtx-b")},
        last_owner={on("site-1/cam", "mtx-a"): DEV_A, on("site-1/cam", "mtx-b"): DEV_A},
    )
    assert result.in_use == frozenset({on("site-1/cam", "mtx-b")})
    assert dict(result.owned_stale) == {on("site-1/cam", "mtx-a"): DEV_A}
    assert result.unowned == frozenset({on("hand-made", "mtx-b")})
    assert result.counts_by_server(["mtx-a", "mtx-b", "mtx-c"]) == {
        "mtx-a": {PathClass.IN_USE: 0, PathClass.OWNED_STALE: 1, PathClass.UNOWNED: 0},
        "mtx-b": {PathClass.IN_USE: 1, PathClass.OWNED_STALE: 0, PathClass.UNOWNED: 1},
        "mtx-c": {PathClass.IN_USE: 0, PathClass.OWNED_STALE: 0, PathClass.UNOWNED: 0},
    }
    assert result.totals_by_server() == {"mtx-a": 1, "mtx-b": 2}


def test_history_on_another_server_is_no_evidence_here() -> None:
    result = classify([on("cam", "mtx-b")], set(), {on("cam", "mtx-a"): DEV_A})
    assert result.unowned == frozenset({on("cam", "mtx-b")}) and not result.owned_stale


def test_a_claimed_name_is_in_use_even_with_ownership_history() -> None:
    result = classify([on("cam")], {on("cam")}, {on("cam"): DEV_A})
    assert result.in_use == frozenset({on("cam")})
    assert dict(result.owned_stale) == {}
    assert result.unowned == frozenset()
    assert result.class_of(on("cam")) is PathClass.IN_USE


def test_owned_stale_keeps_the_last_owner_per_path() -> None:
    result = classify([on("a"), on("b")], set(), {on("a"): DEV_A, on("b"): DEV_B, on("not-observed"): DEV_A})
    assert dict(result.owned_stale) == {on("a"): DEV_A, on("b"): DEV_B}
    assert on("not-observed") not in result.owned_stale


def test_names_without_history_are_unowned_even_when_they_look_like_sense_names() -> None:
    sense_like = on("tenant-a-site-1-dev-0001")
    result = classify([sense_like, on("random")], claimed=set(), last_owner={})
    assert result.unowned == frozenset({sense_like, on("random")})
    assert result.class_of(sense_like) is PathClass.UNOWNED


def test_a_claim_or_history_for_a_name_that_is_not_observed_adds_nothing() -> None:
    result = classify([on("x")], claimed={on("y")}, last_owner={on("z"): DEV_A})
    assert result.in_use == frozenset()
    assert dict(result.owned_stale) == {}
    assert result.unowned == frozenset({on("x")})
    assert result.observed_total == 1


def test_duplicates_in_observed_are_counted_once() -> None:
    observed = [on("a"), on("a"), on("b"), on("b"), on("c"), on("c"), on("c")]
    result = classify(observed, {on("a")}, {on("b"): DEV_A})
    assert result.observed_total == 3
    assert result.counts() == {PathClass.IN_USE: 1, PathClass.OWNED_STALE: 1, PathClass.UNOWNED: 1}


def test_observed_total_is_the_sum_of_the_classes() -> None:
    observed = [on(f"p{i}", f"mtx-{i % 3}") for i in range(50)]
    claimed = {observed[i] for i in range(0, 50, 3)}
    owners = {observed[i]: DEV_A for i in range(0, 50, 2)}
    result = classify(observed, claimed, owners)
    counts = result.counts()
    assert sum(counts.values()) == result.observed_total == 50
    assert sum(result.totals_by_server().values()) == 50
    assert counts[PathClass.IN_USE] == len(claimed)
    assert counts[PathClass.OWNED_STALE] == len(set(owners) - claimed)
    assert counts[PathClass.UNOWNED] == 50 - len(claimed | set(owners))
    # the three classes are disjoint
    assert not result.in_use & set(result.owned_stale)
    assert not result.in_use & result.unowned
    assert not set(result.owned_stale) & result.unowned


def test_empty_input_gives_an_empty_classification() -> None:
    result = classify([], set(), {})
    assert result.observed_total == 0
    assert result.counts() == {PathClass.IN_USE: 0, PathClass.OWNED_STALE: 0, PathClass.UNOWNED: 0}


def test_owned_stale_paths_come_out_sorted_by_server_then_name() -> None:
    paths = [on("c"), on("a", "mtx-b"), on("b")]
    result = classify(paths, set(), dict.fromkeys(paths, DEV_A))
    assert list(result.owned_stale) == [on("b"), on("c"), on("a", "mtx-b")]


def test_class_of_each_class_and_unknown_name() -> None:
    result = Classification(frozenset({on("u")}), {on("s"): DEV_A}, frozenset({on("n")}))
    assert result.class_of(on("u")) is PathClass.IN_USE
    assert result.class_of(on("s")) is PathClass.OWNED_STALE
    assert result.class_of(on("n")) is PathClass.UNOWNED
    assert result.class_of(on("absent")) is None
    assert result.class_of(on("u", "mtx-b")) is None


def test_path_class_values_are_the_stable_codes() -> None:
    assert [c.value for c in PathClass] == ["in_use", "owned_stale", "unowned"]
