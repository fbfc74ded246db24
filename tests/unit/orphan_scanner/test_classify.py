"""Classification of configured MediaMTX paths into in_use / owned_stale / unowned."""

from __future__ import annotations

import uuid

from orphan_scanner.domain.classify import Classification, PathClass, classify

DEV_A = uuid.UUID("00000000-0000-4000-8000-00000000000a")
DEV_B = uuid.UUID("00000000-0000-4000-8000-00000000000b")


def test_each_class_exactly() -> None:
    result = classify(
        observed=["claimed", "stale", "foreign"],
        claimed={"claimed"},
        last_owner={"stale": DEV_A},
    )
    assert result.in_use == frozenset({"claimed"})
    assert dict(result.owned_stale) == {"stale": DEV_A}
    assert result.unowned == frozenset({"foreign"})


def test_a_claimed_name_is_in_use_even_with_ownership_history() -> None:
    result = classify(["cam"], {"cam"}, {"cam": DEV_A})
    assert result.in_use == frozenset({"cam"})
    assert dict(result.owned_stale) == {}
    assert result.unowned == frozenset()
    assert result.class_of("cam") is PathClass.IN_USE


def test_owned_stale_keeps_the_last_owner_per_path() -> None:
    result = classify(["a", "b"], set(), {"a": DEV_A, "b": DEV_B, "not-observed": DEV_A})
    assert dict(result.owned_stale) == {"a": DEV_A, "b": DEV_B}
    assert "not-observed" not in result.owned_stale


def test_names_without_history_are_unowned_even_when_they_look_like_sense_names() -> None:
    sense_like = "tenant-a-site-1-dev-0001"
    result = classify([sense_like, "random"], claimed=set(), last_owner={})
    assert result.unowned == frozenset({sense_like, "random"})
    assert result.class_of(sense_like) is PathClass.UNOWNED


def test_a_claim_or_history_for_a_name_that_is_not_observed_adds_nothing() -> None:
    result = classify(["x"], claimed={"y"}, last_owner={"z": DEV_A})
    assert result.in_use == frozenset()
    assert dict(result.owned_stale) == {}
    assert result.unowned == frozenset({"x"})
    assert result.observed_total == 1


def test_duplicates_in_observed_are_counted_once() -> None:
    result = classify(["a", "a", "b", "b", "c", "c", "c"], {"a"}, {"b": DEV_A})
    assert result.observed_total == 3
    assert result.counts() == {PathClass.IN_USE: 1, PathClass.OWNED_STALE: 1, PathClass.UNOWNED: 1}


def test_observed_total_is_the_sum_of_the_classes() -> None:
    observed = [f"p{i}" for i in range(50)]
    claimed = {f"p{i}" for i in range(0, 50, 3)}
    owners = {f"p{i}": DEV_A for i in range(0, 50, 2)}
    result = classify(observed, claimed, owners)
    counts = result.counts()
    assert sum(counts.values()) == result.observed_total == 50
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


def test_owned_stale_names_come_out_sorted() -> None:
    result = classify(["c", "a", "b"], set(), {"a": DEV_A, "b": DEV_A, "c": DEV_B})
    assert list(result.owned_stale) == ["a", "b", "c"]


def test_class_of_each_class_and_unknown_name() -> None:
    result = Classification(frozenset({"u"}), {"s": DEV_A}, frozenset({"n"}))
    assert result.class_of("u") is PathClass.IN_USE
    assert result.class_of("s") is PathClass.OWNED_STALE
    assert result.class_of("n") is PathClass.UNOWNED
    assert result.class_of("absent") is None


def test_path_class_values_are_the_stable_codes() -> None:
    assert [c.value for c in PathClass] == ["in_use", "owned_stale", "unowned"]
