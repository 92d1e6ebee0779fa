"""SEMANTICS.md section 2: pass@k keys, the per-task estimator and the pass@k aggregates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from events.models import InputEvent
from projections.assembly.summary import summary
from tests.builders import broken, dead, fold, score, started, task_spec
from tests.projections.examples import reward, reward_tasks, section_2_example
from tests.projections.oracle import unbiased


def passk(events: Sequence[InputEvent]) -> dict[str, dict[str, Any]]:
    """The pass@k aggregates of `summary.scores`, by name."""
    scores = summary(fold(events))["summary"]["scores"]
    return {record["name"]: record for record in scores if ".pass@" in record["name"]}


def test_worked_example_of_section_2() -> None:
    figures = passk(section_2_example())
    assert list(figures) == ["reward.score.pass@1", "reward.score.pass@2", "reward.score.pass@3"]
    expected = {1: (7 / 9, 3), 2: (5 / 6, 2), 3: (1.0, 2)}
    for k, (mean, count) in expected.items():
        record = figures[f"reward.score.pass@{k}"]
        assert record["score_type"] == "range"
        assert (record["count"], record["nan_count"]) == (count, 2)
        assert record["mean"] == pytest.approx(mean)
    assert figures["reward.score.pass@1"]["mean"] == pytest.approx(0.7778, abs=5e-5)
    assert figures["reward.score.pass@2"]["mean"] == pytest.approx(0.8333, abs=5e-5)
    assert figures["reward.score.pass@3"]["mean"] == 1.0


def test_pass_at_k_is_a_full_range_aggregate_of_the_per_task_figures() -> None:
    record = passk(section_2_example())["reward.score.pass@2"]  # per-task figures 1 and 2/3
    assert record["sum"] == pytest.approx(5 / 3)
    assert (record["min"], record["max"]) == (pytest.approx(2 / 3), 1.0)
    assert record["variance"] == pytest.approx(1 / 36)
    assert record["std_dev"] == pytest.approx(1 / 6)
    assert record["sample_variance"] == pytest.approx(1 / 18)
    assert record["median"] == pytest.approx(5 / 6)
    assert record["percentiles"]["p10"] == pytest.approx(2 / 3)
    assert record["percentiles"]["p40"] == pytest.approx(2 / 3 + 0.2 / 3)
    assert record["percentiles"]["p90"] == 1.0


@pytest.mark.parametrize(
    ("values", "k"),
    [([1, 0, 1, 0, 0], k) for k in range(1, 6)] + [([0, 1, 0, 1, 0, 1], k) for k in range(1, 7)],
)
def test_per_task_figure_is_the_product_form_to_the_last_bit(values: list[int], k: int) -> None:
    """n = 5, c = 2 and n = 6, c = 3 (where pass@1 is 0.4999999999999999 in the product form, not 0.5)."""
    log = [reward_tasks("t"), *(reward("t", f"r{i}", value) for i, value in enumerate(values))]
    record = passk(log)[f"reward.score.pass@{k}"]
    assert record["mean"] == unbiased(len(values), sum(values), k)
    assert (record["count"], record["nan_count"]) == (1, 0)


def test_product_form_differs_from_the_binomial_ratio_in_the_last_bit() -> None:
    log = [reward_tasks("t"), *(reward("t", f"r{i}", value) for i, value in enumerate([0, 1, 0, 1, 0, 1]))]
    # C(3, 1) / C(6, 1) = 0.5 exactly; the product (3/4)(4/5)(5/6), rounded step by step, is not.
    assert passk(log)["reward.score.pass@1"]["mean"] == 1 - (1 - 1 / 4) * (1 - 1 / 5) * (1 - 1 / 6)
    assert passk(log)["reward.score.pass@1"]["mean"] == 0.4999999999999999


@pytest.mark.parametrize(
    ("value", "passed"),
    [(1.0, True), (1, True), (1.5, True), ("Infinity", True), (True, True),
     (0.999, False), (0.0, False), (-2, False), ("NaN", False), ("-Infinity", False), (False, False)],
)  # fmt: skip
def test_an_attempt_passes_when_not_null_and_at_least_one(value: Any, passed: bool) -> None:
    record = passk([reward_tasks("t"), reward("t", "a", value)])["reward.score.pass@1"]
    assert record["mean"] == (1.0 if passed else 0.0)


def test_a_dead_trial_is_an_attempt_that_does_not_pass() -> None:
    record = passk([reward_tasks("t"), dead("t", "a", "reward"), reward("t", "b", 1.0)])["reward.score.pass@1"]
    assert record["mean"] == pytest.approx(0.5)


@pytest.mark.parametrize("kind", ["continuous", "boolean"])
def test_continuous_and_boolean_keys_are_eligible(kind: str) -> None:
    log: list[InputEvent] = [started(tasks=[task_spec("t", {"m.x": kind})]), score("t", "a", "m", {"x": True})]
    assert list(passk(log)) == ["m.x.pass@1"]


@pytest.mark.parametrize("kind", ["discrete", "label", "model"])
def test_other_kinds_are_not_eligible(kind: str) -> None:
    log: list[InputEvent] = [started(tasks=[task_spec("t", {"m.x": kind})]), score("t", "a", "m", {"x": 1.0})]
    assert passk(log) == {}


def test_undeclared_output_never_is_eligible() -> None:
    log = [reward_tasks("t"), reward("t", "a", 1.0), score("t", "a", "judge", {"pass": 1.0})]
    assert list(passk(log)) == ["reward.score.pass@1"]


def test_no_specs_means_no_pass_at_k() -> None:
    assert passk([reward("t", "a", 1.0), score("t", "a", "ok", {"flag": True})]) == {}


def test_every_task_having_the_key_counts_whatever_it_declares() -> None:
    """t1 declares m.x continuous (eligible); t2 discrete; t3 not at all (rule 2); t4 label (no key)."""
    specs = [
        task_spec("t1", {"m.x": "continuous"}),
        task_spec("t2", {"m.x": "discrete"}),
        task_spec("t3", {"m.y": "continuous"}),
        task_spec("t4", {"m.x": "label"}),
    ]
    log = [started(tasks=specs)] + [
        score(t, f"{t}-a", "m", {"x": v}) for t, v in [("t1", 1), ("t2", 0), ("t3", 1), ("t4", 0)]
    ]
    record = passk(log)["m.x.pass@1"]
    assert (record["count"], record["nan_count"]) == (3, 0)
    assert record["mean"] == pytest.approx(2 / 3)


def test_a_key_no_task_measured_gets_no_entries() -> None:
    log = [reward_tasks("t1", "t2"), broken("t1", "a", "reward")]
    assert passk(log) == {}


def test_k_runs_to_the_largest_n_and_short_tasks_are_left_out() -> None:
    log = [reward_tasks("t1", "t2", "t3"), reward("t1", "a", 0), reward("t1", "b", 1), reward("t2", "c", 0)]
    figures = passk(log)
    assert list(figures) == ["reward.score.pass@1", "reward.score.pass@2"]
    assert (figures["reward.score.pass@1"]["count"], figures["reward.score.pass@1"]["nan_count"]) == (2, 1)
    assert figures["reward.score.pass@1"]["mean"] == pytest.approx(0.25)
    assert (figures["reward.score.pass@2"]["count"], figures["reward.score.pass@2"]["nan_count"]) == (1, 1)
    assert figures["reward.score.pass@2"]["mean"] == 1.0


def test_pass_at_k_entries_are_sorted_by_key_then_numerically_by_k() -> None:
    specs = [task_spec("t", {"a.z": "continuous", "a-b.x": "boolean"})]
    log: list[InputEvent] = [
        started(tasks=specs),
        *(score("t", f"r{i}", "a", {"z": 1}) for i in range(10)),
        score("t", "q", "a-b", {"x": 1}),
    ]
    names = [r["name"] for r in summary(fold(log))["summary"]["scores"] if ".pass@" in r["name"]]
    assert names == ["a-b.x.pass@1"] + [f"a.z.pass@{k}" for k in range(1, 11)]


def test_large_n_is_computed_without_overflow() -> None:
    n = 1200
    log = [reward_tasks("t"), *(reward("t", f"r{i}", i % 2) for i in range(n))]
    figures = passk(log)
    assert len(figures) == n
    assert figures["reward.score.pass@1"]["mean"] == pytest.approx(0.5)
    assert figures["reward.score.pass@600"]["mean"] == pytest.approx(1.0)
    assert figures["reward.score.pass@601"]["mean"] == 1.0
    means = [figures[f"reward.score.pass@{k}"]["mean"] for k in range(1, n + 1)]
    assert all(0.0 <= m <= 1.0 for m in means)
    assert means == sorted(means)
