"""Miller's sample-size rule for paired differences (projections.analysis.gate.power), by hand."""

from __future__ import annotations

import math

import pytest

from projections.analysis.compare import compare
from projections.analysis.gate.power import NORMAL_80, Power, power, tasks_needed
from tests.builders import scored_run, summary_of
from tests.projections.examples import BASELINE, CANDIDATE


def test_the_hand_computed_example() -> None:
    base, cand = summary_of(scored_run("base", BASELINE), "base"), summary_of(scored_run("cand", CANDIDATE), "cand")
    (key,) = compare(base, cand).keys
    # d = (-1/3, -2/3, 1/3, 0): sd = sqrt(5/27) = 0.4303; the observed size is 1/6, so
    # n = ((1.95996 + 0.84162) x 0.4303 / (1/6))^2 = 7.2336^2 = 52.33: 53 tasks, 49 more than the 4 compared.
    figures = power(key)
    assert figures is not None
    assert figures.effect == pytest.approx(1 / 6)
    assert (figures.tasks_needed, figures.more_tasks) == (53, 49)
    assert ((1.959963984540054 + NORMAL_80) * math.sqrt(5 / 27) / (1 / 6)) ** 2 == pytest.approx(52.3259, abs=1e-4)
    # A drop of 0.5 (the gate's --threshold) needs (2.8016 x 0.4303 / 0.5)^2 = 5.81: 6 tasks, 2 more.
    assert power(key, 0.5) == Power(effect=0.5, tasks_needed=6, more_tasks=2)


def test_no_size_or_no_spread_to_go_on() -> None:
    same = summary_of(scored_run("r", {"a": [1, 0], "b": [0, 0]}), "r")
    (key,) = compare(same, same).keys
    assert key.mean_difference == 0.0
    assert power(key) is None  # nothing to resolve
    assert power(key, 0.1) == Power(0.1, 2, 0)  # sd 0: two tasks would do, and two are compared
    assert power(key, 0.0) is None
    x, y = (summary_of(scored_run(run_id, {"a": [1]}), run_id) for run_id in ("x", "y"))
    (single,) = compare(x, y).keys
    assert power(single, 0.1) is None  # one paired task: no standard deviation


def test_more_spread_or_a_smaller_effect_needs_more_tasks() -> None:
    assert tasks_needed(0.5, 0.1) == math.ceil((2.801585218113 * 5) ** 2) == 197
    assert tasks_needed(0.5, 0.05) > tasks_needed(0.5, 0.1) > tasks_needed(0.25, 0.1)
