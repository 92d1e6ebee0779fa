"""Two runs compared (projections.analysis.compare): a hand-computed example, and the gate's laws."""

from __future__ import annotations

import math

import pytest
from hypothesis import given

from events.models import InputEvent
from events.nonfinite import read_float
from events.outputs import RunSummary
from projections.analysis.compare import (
    NotComparable,
    PassAt,
    TaskDelta,
    Unmeasured,
    VerdictChange,
    compare,
)
from tests.builders import closed, score, scored_run, started, summary_of, summary_pair, task_spec
from tests.projections.examples import BASELINE, CANDIDATE
from tests.strategies import run_logs


def figure(summary: RunSummary, name: str) -> float | None:
    return next(read_float(score.mean) for score in summary.summary.scores if score.name == name)


def test_the_hand_computed_example() -> None:
    baseline, candidate = summary_pair(BASELINE, CANDIDATE)
    comparison = compare(baseline, candidate)
    assert (comparison.baseline, comparison.candidate) == ("base", "cand")
    assert comparison.only_baseline_tasks == ("e",)
    assert comparison.only_candidate_tasks == ("f",)
    assert comparison.only_baseline_keys == comparison.only_candidate_keys == ()
    (key,) = comparison.keys
    assert key.key == "reward.score"
    assert key.tasks == (
        TaskDelta("a", 1.0, 2 / 3, 2 / 3 - 1.0, 3, 3),
        TaskDelta("b", 2 / 3, 0.0, 0.0 - 2 / 3, 3, 3),
        TaskDelta("c", 0.0, 1 / 3, 1 / 3, 3, 3),
        TaskDelta("d", 1.0, 1.0, 0.0, 2, 4),
    )
    # d = (-1/3, -2/3, 1/3, 0): mean -1/6; deviations -1/6, -1/2, 1/2, 1/6 square to 5/9 in all,
    # so the sample variance is 5/27 and the standard error sqrt(5/27) / sqrt(4) = sqrt(5/108).
    assert key.mean_difference == pytest.approx(-1 / 6, abs=1e-15)
    assert key.sample_std_dev == pytest.approx(math.sqrt(5 / 27), abs=1e-15)
    assert key.standard_error == pytest.approx(math.sqrt(5 / 108), abs=1e-15)
    # Student's t with 4 - 1 = 3 degrees of freedom (SEMANTICS.md section 8's t975.json), not 1.96:
    # -1/6 -+ 3.1824463052837078 x 0.2151657414559676.
    assert key.critical_value == 3.1824463052837078
    assert key.interval == pytest.approx(
        (-1 / 6 - 3.1824463052837078 * math.sqrt(5 / 108), -1 / 6 + 3.1824463052837078 * math.sqrt(5 / 108))
    )
    assert key.interval == pytest.approx((-0.851420, 0.518087), abs=1e-6)
    assert key.regressions == (VerdictChange("a", "solved", "flaky"), VerdictChange("b", "flaky", "failed"))
    assert key.fixes == (VerdictChange("c", "failed", "flaky"),)
    assert key.only_baseline == ("e",)
    assert key.only_candidate == ("f",)
    assert key.unmeasured == (Unmeasured("g", True, False), Unmeasured("h", False, True))
    # pass@k as each summary states it: pass@1 over each run's own measured tasks.
    assert key.baseline_pass_at[0] == PassAt(1, figure(baseline, "reward.score.pass@1"), 6, 1)
    assert key.baseline_pass_at[0].mean == pytest.approx((1 + 2 / 3 + 0 + 1 + 2 / 3 + 1) / 6)
    assert key.candidate_pass_at[0] == PassAt(1, figure(candidate, "reward.score.pass@1"), 6, 1)
    assert key.candidate_pass_at[0].mean == pytest.approx((2 / 3 + 0 + 1 / 3 + 1 + 1 + 1) / 6)
    assert [f.k for f in key.baseline_pass_at] == [1, 2, 3]
    assert [f.k for f in key.candidate_pass_at] == [1, 2, 3, 4]
    assert key.candidate_pass_at[3].mean == figure(candidate, "reward.score.pass@4")


def test_the_t_interval_of_equal_drops_has_no_width() -> None:
    baseline, candidate = summary_pair({"a": [1, 1], "b": [1, 1], "c": [1, 0]}, {"a": [1, 0], "b": [0, 1], "c": [0, 0]})
    comparison = compare(baseline, candidate)
    (key,) = comparison.keys
    assert [task.difference for task in key.tasks] == [-0.5, -0.5, -0.5]
    assert key.standard_error == 0.0
    assert key.critical_value == 4.302652729749462  # t with 2 degrees of freedom
    assert key.interval == (-0.5, -0.5)


def test_below_two_paired_tasks_there_is_no_interval() -> None:
    baseline, candidate = summary_pair({"a": [1, 1]}, {"a": [0, 0]})
    comparison = compare(baseline, candidate)
    (key,) = comparison.keys
    assert key.mean_difference == -1.0
    assert (key.sample_std_dev, key.standard_error, key.critical_value, key.interval) == (None, None, None, None)
    none_shared = compare(*summary_pair({"a": [1]}, {"b": [1]}))
    assert (none_shared.keys[0].tasks, none_shared.keys[0].mean_difference) == ((), None)


def test_keys_only_one_run_has_are_listed_and_the_shared_ones_compared() -> None:
    baseline = summary_of(scored_run("base", {"a": [1], "b": [0]}), "base")
    spec = task_spec("a", {"reward.score": "continuous", "judge.pass": "boolean", "steps.count": "discrete"})
    events = [
        started("cand", [spec]),
        score("a", "a-0", "reward", {"score": 1}, run_id="cand"),
        score("a", "a-0", "judge", {"pass": True}, run_id="cand"),
        closed("cand"),
    ]
    candidate = summary_of(events, "cand")
    comparison = compare(baseline, candidate)
    assert [key.key for key in comparison.keys] == ["reward.score"]
    assert comparison.only_candidate_keys == ("judge.pass",)  # steps.count is discrete: no pass@k
    assert comparison.only_baseline_tasks == ("b",)
    assert compare(baseline, candidate, ["reward.score"]) == comparison
    with pytest.raises(
        NotComparable, match=r"'judge.pass' is not a pass@k key of both runs; shared keys: reward.score"
    ):
        compare(baseline, candidate, ["judge.pass"])


@given(run_logs())
def test_a_run_against_itself_differs_by_nothing(log: list[InputEvent]) -> None:
    run = summary_of(log)
    comparison = compare(run, run)
    for key in comparison.keys:
        assert all(task.difference == 0.0 for task in key.tasks)
        if key.tasks:
            assert key.mean_difference == 0.0
        if len(key.tasks) >= 2:
            assert key.interval == (0.0, 0.0)
        assert key.regressions == key.fixes == ()
        assert key.only_baseline == key.only_candidate == ()
        assert key.baseline_pass_at == key.candidate_pass_at
    assert comparison.only_baseline_tasks == comparison.only_candidate_tasks == ()
