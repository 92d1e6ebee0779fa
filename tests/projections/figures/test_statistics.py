"""SEMANTICS.md section 8: `statistics`, pass@k and pass^k with standard errors and 95% intervals."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pytest

from events.models import InputEvent
from projections.assembly.summary import summary
from projections.figures.passk import hat_estimates
from projections.figures.t975 import t975
from tests.builders import fold, scored_run, started, task_spec
from tests.projections.examples import reward, section_2_example

FIELDS = ["k", "count", "nan_count", "mean", "stderr", "ci95_low", "ci95_high"]


def statistics(events: Sequence[InputEvent]) -> dict[str, Any]:
    """The summary's `statistics` as a subscriber reads it (the encoded bytes, decoded)."""
    figures: dict[str, Any] = orjson.loads(orjson.dumps(summary(fold(events))["statistics"]))
    return figures


def run_of(attempts: Mapping[str, Sequence[object]]) -> list[InputEvent]:
    return scored_run("run", attempts)


def test_worked_example_of_section_8() -> None:
    figures = statistics(section_2_example())
    assert list(figures) == ["reward.score"]
    key = figures["reward.score"]
    assert list(key) == ["tasks", "pass_at_k", "pass_hat_k"]
    assert key["tasks"] == 3
    # The example's own floats: pass@1 over 1.0, 1 - (1 - 1/3) and 1.0 (the product form);
    # its interval (-0.17836727327765844, 1.7339228288332138) clipped to [0, 1].
    assert key["pass_at_k"][0] == {
        "k": 1,
        "count": 3,
        "nan_count": 2,
        "mean": 0.7777777777777777,
        "stderr": 0.22222222222222227,
        "ci95_low": 0.0,
        "ci95_high": 1.0,
    }
    mean, stderr = key["pass_at_k"][0]["mean"], key["pass_at_k"][0]["stderr"]
    assert (mean - t975(2) * stderr, mean + t975(2) * stderr) == (-0.17836727327765844, 1.7339228288332138)
    hat = key["pass_hat_k"]
    assert [entry["k"] for entry in hat] == [1, 2, 3]
    # pass^1 is pass@1 in meaning; c/n = 1/3 rounds once, so its mean is the other last bit.
    assert (hat[0]["count"], hat[0]["nan_count"], hat[0]["mean"]) == (3, 2, 0.7777777777777778)
    for entry in hat[1:]:  # per task 1.0 (3 of 3 pass) and 0.0 (1 of 3); [1] has n < k
        assert entry == {**entry, "count": 2, "nan_count": 2, "mean": 0.5, "stderr": 0.5}
        assert (entry["ci95_low"], entry["ci95_high"]) == (0.0, 1.0)


def test_entries_have_the_contracts_key_order_one_per_k_up_to_the_largest_n() -> None:
    figures = statistics(run_of({"a": [1, 0, 1, 1], "b": [0, 1], "c": []}))
    for entries in figures["reward.score"]["pass_at_k"], figures["reward.score"]["pass_hat_k"]:
        assert [list(entry) for entry in entries] == [FIELDS] * 4
        assert [entry["k"] for entry in entries] == [1, 2, 3, 4]
        assert [(entry["count"], entry["nan_count"]) for entry in entries] == [(2, 1), (2, 1), (1, 1), (1, 1)]


def test_pass_at_k_entries_are_the_pass_at_k_aggregates_to_the_bit() -> None:
    events = run_of({"a": [1, 0, 1, 0, 0], "b": [0, 1, 0, 1, 0, 1], "c": [1, 1], "d": [None, 0.5, 1]})
    whole = summary(fold(events))
    aggregates = {record["name"]: record for record in whole["summary"]["scores"]}
    entries = whole["statistics"]["reward.score"]["pass_at_k"]
    assert len(entries) == 6
    for entry in entries:
        record = aggregates[f"reward.score.pass@{entry['k']}"]
        assert (entry["count"], entry["nan_count"], entry["mean"]) == (
            record["count"],
            record["nan_count"],
            record["mean"],
        )
        if record["count"] > 1:
            assert entry["stderr"] == record["sample_std_dev"] / math.sqrt(record["count"])


@pytest.mark.parametrize(("n", "c"), [(1, 1), (3, 1), (5, 2), (6, 3), (7, 7), (10, 9), (10, 0)], ids=str)
def test_per_task_pass_hat_k_is_the_product_in_order_and_zero_below_c(n: int, c: int) -> None:
    hat = statistics(run_of({"t": [1] * c + [0] * (n - c)}))["reward.score"]["pass_hat_k"]
    for k in range(1, n + 1):
        product = 1.0
        for i in range(k):
            product *= (c - i) / (n - i)
        expected = product if c >= k else 0.0
        assert hat[k - 1]["mean"] == expected


@pytest.mark.parametrize(("n", "c"), [(10, 0), (6, 2)])
def test_per_task_pass_hat_k_is_zero_not_minus_zero_past_c(n: int, c: int) -> None:
    # The product's factors turn negative past c: 0.0 * -1/9 would be -0.0.
    figures = hat_estimates(n, c)
    assert len(figures) == n
    assert all(math.copysign(1.0, figure) == 1.0 for figure in figures[c:])
    assert not any(figures[c:])


def test_product_order_shows_in_the_last_bit() -> None:
    # (6/7)(5/6)(4/5): multiplied left to right it is 0.5714285714285715; 4/7 is 0.5714285714285714.
    hat = statistics(run_of({"t": [1] * 6 + [0]}))["reward.score"]["pass_hat_k"]
    assert hat[2]["mean"] == 6 / 7 * (5 / 6) * (4 / 5) != 4 / 7


def test_stderr_and_interval_are_null_below_two_tasks() -> None:
    entries = statistics(run_of({"a": [1, 0, 1], "b": []}))["reward.score"]["pass_at_k"]
    for entry in entries:
        assert (entry["count"], entry["nan_count"]) == (1, 1)
        assert (entry["stderr"], entry["ci95_low"], entry["ci95_high"]) == (None, None, None)


@pytest.mark.parametrize("tasks", [3, 11, 40])
def test_interval_is_students_t_with_count_minus_one_degrees_of_freedom(tasks: int) -> None:
    # Tasks passing 2, 3 and 3 of 5 in turn: an interval inside (0, 1), so not clipped.
    attempts = {f"t{i}": [1, 1, 0, 0, 0] if i % 3 == 0 else [1, 1, 1, 0, 0] for i in range(tasks)}
    entry = statistics(run_of(attempts))["reward.score"]["pass_at_k"][0]
    mean, stderr = entry["mean"], entry["stderr"]
    assert mean - t975(tasks - 1) * stderr > 0.0
    assert (entry["ci95_low"], entry["ci95_high"]) == (mean - t975(tasks - 1) * stderr, mean + t975(tasks - 1) * stderr)
    assert entry["ci95_high"] - entry["ci95_low"] > 2 * 1.96 * stderr  # wider than the normal's


def test_interval_is_clipped_to_zero_and_one() -> None:
    entry = statistics(run_of({"a": [1], "b": [1], "c": [0]}))["reward.score"]["pass_at_k"][0]
    assert entry["mean"] - t975(2) * entry["stderr"] < 0.0
    assert entry["mean"] + t975(2) * entry["stderr"] > 1.0
    assert (entry["ci95_low"], entry["ci95_high"]) == (0.0, 1.0)


def test_tasks_that_all_agree_have_a_zero_width_interval() -> None:
    entry = statistics(run_of({"a": [1, 1], "b": [1, 1]}))["reward.score"]["pass_hat_k"][1]
    assert entry == {"k": 2, "count": 2, "nan_count": 0, "mean": 1.0, "stderr": 0.0, "ci95_low": 1.0, "ci95_high": 1.0}


def test_only_eligible_keys_with_a_measured_task_appear_sorted() -> None:
    events: list[InputEvent] = [
        started(
            tasks=[
                task_spec("t", {"zeta.ok": "boolean", "reward.score": "continuous", "judge.ok": "boolean"}),
                task_spec("u", {"steps.count": "discrete", "judge.ok": "boolean"}),
            ]
        ),
        reward("t", "a", 1.0),
        reward("t", "b", 0.0),
    ]
    figures = statistics(events)
    assert list(figures) == ["reward.score"]  # judge.ok and zeta.ok: nothing measured; steps.count not eligible
    events.append(reward("u", "c", 1.0))  # u does not declare reward.score: it gets the key by rule 2
    assert statistics(events)["reward.score"]["tasks"] == 2


def test_a_run_without_specs_has_no_statistics() -> None:
    assert statistics([reward("t", "a", 1.0), reward("t", "b", 0.0)]) == {}
