"""The gate's decisions (projections.analysis.gate.decision) and its small-sample interval
(projections.analysis.gate.exact)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from projections.analysis.compare import compare
from projections.analysis.gate.decision import (
    BLOCK,
    EXACT,
    EXACT_BELOW,
    INCONCLUSIVE,
    PASS,
    WARN,
    T,
    decide,
    decide_key,
    worst,
)
from projections.analysis.gate.exact import subset_mean_interval
from tests.builders import summary_pair
from tests.projections.examples import BASELINE, CANDIDATE


@pytest.mark.parametrize(
    ("interval", "threshold", "expected"),
    [
        ((-0.3, -0.2), 0.1, BLOCK),  # wholly below -threshold
        ((-0.3, -0.2), 0.0, BLOCK),
        ((-0.08, -0.02), 0.1, WARN),  # below 0, within the tolerance
        ((-0.15, -0.02), 0.1, WARN),  # below 0, the tolerance neither shown nor ruled out
        ((-0.15, 0.05), 0.1, INCONCLUSIVE),  # holds both 0 and -0.1
        ((-0.05, 0.05), 0.0, INCONCLUSIVE),  # holds 0, which is -threshold too
        ((-0.05, 0.05), 0.1, PASS),  # a drop beyond 0.1 ruled out
        ((0.0, 0.0), 0.0, PASS),  # no change at all is no drop
        ((0.02, 0.3), 0.0, PASS),
        ((0.1, -0.1), 0.0, BLOCK),  # a confidence sequence's empty running intersection: the safe side
    ],
)
def test_the_four_decisions(interval: tuple[float, float], threshold: float, expected: str) -> None:
    assert decide(interval, threshold) == expected


def test_the_worst_key_decides() -> None:
    assert worst([PASS, WARN, PASS]) == WARN
    assert worst([WARN, INCONCLUSIVE]) == INCONCLUSIVE
    assert worst([INCONCLUSIVE, BLOCK, PASS]) == BLOCK
    assert worst([]) == PASS


def brute_force(differences: Sequence[float]) -> tuple[float, float]:
    """Hartigan's interval by listing every non-empty subset."""
    means = sorted(
        sum(subset) / len(subset)
        for size in range(1, len(differences) + 1)
        for subset in itertools.combinations(differences, size)
    )
    cut = int(0.025 * 2 ** len(differences))
    return (-1.0, 1.0) if cut == 0 else (means[cut - 1], means[-cut])


@given(st.lists(st.sampled_from([-1.0, -0.5, -1 / 3, 0.0, 0.25, 0.5, 1.0]), min_size=1, max_size=10))
def test_the_exact_interval_is_hartigans(differences: list[float]) -> None:
    low, high = subset_mean_interval(differences)
    expected = brute_force(differences)
    assert (low, high) == pytest.approx(expected)
    assert -1.0 <= low <= high <= 1.0


def test_the_exact_interval_covers_at_least_95_percent_under_symmetry() -> None:
    """Every sign pattern of eight fixed magnitudes is equally likely when nothing changed: the
    share of patterns whose interval excludes 0 is the false-alarm rate, at most 5%."""
    magnitudes = [0.1, 0.2, 0.3, 0.5, 0.5, 0.7, 0.9, 1.0]
    excluded = 0
    for signs in itertools.product((-1, 1), repeat=len(magnitudes)):
        low, high = subset_mean_interval([sign * value for sign, value in zip(signs, magnitudes, strict=True)])
        excluded += not low <= 0.0 <= high
    assert excluded / 2 ** len(magnitudes) <= 0.05
    assert excluded > 0  # and it can decide with eight tasks


def test_few_tasks_use_the_exact_interval_and_cannot_block_below_six() -> None:
    worse = {"a": [1, 1], "b": [1, 1], "c": [1, 0]}
    much_worse = {"a": [1, 0], "b": [0, 1], "c": [0, 0]}
    (key,) = compare(*summary_pair(worse, much_worse)).keys
    assert key.interval == (-0.5, -0.5)  # Student's t, with no spread among three tasks
    decided = decide_key(key, 0.0)
    assert (decided.method, decided.interval, decided.decision) == (EXACT, (-1.0, 1.0), INCONCLUSIVE)
    assert "exact sign-flip 95% interval [-1.0000, +1.0000] over 3 paired tasks holds 0" in decided.reason
    assert (decided.tasks_to_decide, decided.more_tasks) == (6, 3)  # the exact interval's least
    eight = {f"t{i}": [1, 1] for i in range(8)}
    (key,) = compare(*summary_pair(eight, {task: [1, 0] for task in eight})).keys
    assert decide_key(key, 0.0).decision == BLOCK
    assert decide_key(key, 0.0).interval == (-0.5, -0.5)
    assert decide_key(key, 0.5).decision == WARN  # a real drop, within the tolerance
    assert "within the tolerance (-0.5)" in decide_key(key, 0.5).reason


def test_from_twenty_tasks_on_students_t_decides() -> None:
    base = {f"t{i}": [1, 1] for i in range(EXACT_BELOW)}
    cand = {task: [1, 0] if i % 10 == 0 else [1, 1] for i, task in enumerate(base)}
    (key,) = compare(*summary_pair(base, cand)).keys
    decided = decide_key(key, 0.0)
    assert (decided.method, decided.interval) == (T, key.interval)
    assert decided.decision == INCONCLUSIVE  # mean -0.05 over 20 tasks: the t interval holds 0
    assert decided.tasks_to_decide is not None
    assert decided.more_tasks == decided.tasks_to_decide - EXACT_BELOW
    assert decided.more_tasks > 0


def test_the_worked_example_is_inconclusive_and_regressions_block() -> None:
    (key,) = compare(*summary_pair(BASELINE, CANDIDATE)).keys
    assert decide_key(key, 0.0).decision == INCONCLUSIVE  # four paired tasks: too few to tell
    blocked = decide_key(key, 0.0, max_regressions=1)
    assert (blocked.decision, blocked.reason) == (BLOCK, "2 regressions, more than the 1 allowed")
    assert decide_key(key, 0.0, max_regressions=2).decision == INCONCLUSIVE


def test_one_regression_past_the_allowed_is_named_in_the_singular() -> None:
    (key,) = compare(*summary_pair({"a": [1, 1], "b": [1, 1]}, {"a": [0, 0], "b": [1, 1]})).keys
    blocked = decide_key(key, 0.0, max_regressions=0)
    assert (blocked.decision, blocked.reason) == (BLOCK, "1 regression, more than the 0 allowed")


def test_one_paired_task_is_inconclusive() -> None:
    (key,) = compare(*summary_pair({"a": [1, 1]}, {"a": [0, 0]})).keys
    decided = decide_key(key, 0.0)
    assert (decided.decision, decided.interval, decided.method) == (INCONCLUSIVE, None, None)
    assert decided.reason == "1 paired task: too few for an interval"


tasks_attempts = st.dictionaries(
    st.sampled_from([f"t{i}" for i in range(8)]),
    st.lists(st.sampled_from([0, 1, 1.0, 0.5, None, "NaN"]), min_size=1, max_size=5),
    min_size=1,
)


@given(tasks_attempts)
def test_a_run_against_itself_never_blocks_nor_warns(attempts: dict[str, list[object]]) -> None:
    for key in compare(*summary_pair(attempts, attempts)).keys:
        assert decide_key(key, 0.0, max_regressions=0).decision in (PASS, INCONCLUSIVE)


@given(tasks_attempts)
def test_a_candidate_failing_every_task_the_baseline_solved_is_blocked(
    baseline_attempts: dict[str, list[object]],
) -> None:
    solved_tasks = [
        task for task, values in baseline_attempts.items() if all(isinstance(v, int | float) and v >= 1 for v in values)
    ]
    assume(solved_tasks)
    candidate_attempts = {
        task: [0] * len(values) if task in solved_tasks else values for task, values in baseline_attempts.items()
    }
    (key,) = compare(*summary_pair(baseline_attempts, candidate_attempts)).keys
    assert decide_key(key, 0.0, max_regressions=0).decision == BLOCK
    assert decide_key(key, 0.0, max_regressions=len(solved_tasks) - 1).decision == BLOCK
    if len(solved_tasks) == len(baseline_attempts) >= 6:
        # Every task went from solved to failed: the exact interval alone blocks, whatever drop is tolerated below 1.
        assert decide_key(key, 0.99).decision == BLOCK


def test_what_would_decide_an_inconclusive_key() -> None:
    """Ten tasks every baseline attempt passes; the candidate passes 3 of 4 on half of them and
    4 of 4 on the rest: the differences are -0.25 and 0, mean -0.125, sd 0.1318, and with a
    tolerance of 0.2 the exact interval [-0.25, 0] holds both 0 and -0.2."""
    base = {f"t{i}": [1, 1, 1, 1] for i in range(10)}
    cand = {task: [1, 1, 1, 0] if i % 2 else [1, 1, 1, 1] for i, task in enumerate(base)}
    (key,) = compare(*summary_pair(base, cand)).keys
    decided = decide_key(key, 0.2)
    assert (decided.decision, decided.interval) == (INCONCLUSIVE, (-0.25, 0.0))
    # Miller's rule for an effect of max(-0.125 + 0.2, 0.125): 9 tasks, but never fewer than 11.
    assert (decided.tasks_to_decide, decided.more_tasks) == (11, 1)
    # The candidate's per-attempt noise (0.75 x 0.25 x 4/3 on half the tasks: 0.125 a task) over
    # the room 10 x (0.125 / 2.8016)^2 = 0.0199 that the tasks' own differences (none beyond the
    # attempts' noise) and the baseline's (none) leave: 7 attempts a task.
    assert decided.attempts_to_decide == 7
    # A baseline as noisy as the candidate leaves no room: more candidate attempts cannot decide.
    noisy = {task: [1, 1, 0, 0] for task in base}
    (key,) = compare(
        *summary_pair(noisy, {t: [1, 1, 1, 0] if i % 2 else [1, 0, 0, 0] for i, t in enumerate(noisy)})
    ).keys
    decided = decide_key(key, 0.1)
    assert decided.decision == INCONCLUSIVE
    assert decided.attempts_to_decide is None
    assert decided.tasks_to_decide is not None
