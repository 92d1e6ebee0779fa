"""The live gate's fold (projections.analysis.gate.live): what one observation is, and when it decides."""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.models import InputEvent
from projections.analysis.compare import NotComparable, compare
from projections.analysis.gate.decision import BLOCK, INCONCLUSIVE, WARN
from projections.analysis.gate.live import LiveGate, Look, live_gate
from projections.fold.run import RunState, apply
from tests.builders import broken, closed, dead, score, scored_run, started, summary_of, task_spec


def reward(task_id: str, trial_id: str, value: object) -> InputEvent:
    return score(task_id, trial_id, "reward", {"score": value}, run_id="cand")


def declared(*task_ids: str, attempts: int | None = 2) -> InputEvent:
    specs = [task_spec(task_id, {"reward.score": "continuous"}) for task_id in task_ids]
    return started("cand", specs, attempts_per_task=attempts)


def feed(gate: LiveGate, run: RunState, events: Iterable[InputEvent]) -> list[list[Look]]:
    """The looks after each event."""
    looks = []
    for event in events:
        applied = apply(run, event)
        looks.append(gate.after(run, applied.task_id))
    return looks


BASELINE = summary_of(scored_run("base", {"a": [1, 1], "b": [1, 0], "c": [0, 0], "u": []}), "base")


def test_each_attempt_is_paired_with_the_baselines_attempt_of_its_position_and_stays_as_it_was() -> None:
    gate, run = live_gate(BASELINE, None, 0.0), RunState("cand")
    looks = feed(
        gate,
        run,
        [
            declared("a", "b", "c", "u", "x"),
            reward("a", "a-0", 0),  # a's first attempt against the baseline's first (passed): -1
            broken("a", "a-1", "reward"),  # a metric failure is no attempt
            dead("a", "a-2", "reward"),  # a dead trial did not pass; against the baseline's second: -1
            reward("a", "a-3", 1),  # the baseline has no third attempt of a: no partner
            reward("b", "b-0", 1),  # against 1: 0
            reward("b", "b-1", 1),  # against 0: +1
            reward("u", "u-0", 1),  # the baseline never measured u: not paired
            reward("x", "x-0", 1),  # nor has it x
        ],
    )
    assert [len(each) for each in looks] == [0, 1, 0, 1, 0, 1, 1, 0, 0]
    assert looks[1] == [Look("reward.score", 1, 1, -1.0, (-1.0, 1.0), INCONCLUSIVE)]
    last = looks[6][0]
    assert (last.paired, last.pairs) == (2, 4)
    assert last.mean == pytest.approx(-0.25)
    assert gate.paired == {"reward.score": {"a", "b"}}
    assert gate.decision(closed=False) is None


def test_no_attempts_per_task_is_needed_and_the_close_adds_nothing() -> None:
    gate, run = live_gate(BASELINE, None, 0.0), RunState("cand")
    looks = feed(gate, run, [declared("a", "b", "c", attempts=None), reward("a", "a-0", 1), reward("c", "c-0", 1)])
    assert [len(each) for each in looks] == [0, 1, 1]
    assert feed(gate, run, [closed("cand")]) == [[]]
    look = gate.look("reward.score")
    assert (look.paired, look.pairs) == (2, 2)
    assert look.mean == pytest.approx(0.5)  # a: 1 vs 1, c: 1 vs 0
    assert gate.decision(closed=True) == INCONCLUSIVE  # closed, and two attempts settle nothing


def test_several_attempts_landing_at_once_are_each_paired_with_their_share_of_the_passes() -> None:
    baseline = summary_of(scored_run("base", {"a": [1, 0, 0, 1]}), "base")
    gate = live_gate(baseline, None, 0.0)
    assert gate.observe("reward.score", "a", 1, 1)  # 1 vs 1
    assert gate.observe("reward.score", "a", 4, 2)  # three more, one passing: 1/3 each against 0, 0, 1
    look = gate.look("reward.score")
    assert look.pairs == 4
    assert look.mean == pytest.approx((0 + 1 / 3 + 1 / 3 - 2 / 3) / 4)
    assert not gate.observe("reward.score", "a", 4, 3)  # the same count again: what was observed stays
    assert not gate.observe("reward.score", "a", 5, 3)  # past the baseline's attempts: no partner


def many(run_id: str, rates: list[list[int]], attempts: int | None = None) -> list[InputEvent]:
    """A closed run of one task per list; `attempts`: its run.started's attempts_per_task."""
    events = scored_run(run_id, {f"t{i}": values for i, values in enumerate(rates)})
    if attempts is not None:
        events[0] = events[0].model_copy(update={"attempts_per_task": attempts})
    return events


def test_a_clear_regression_is_established_before_the_close_and_an_equal_run_is_not() -> None:
    tasks = [[1, 1, 1, 1] if i % 3 else [1, 1, 0, 1] for i in range(120)]
    baseline = summary_of(many("base", tasks), "base")
    worse = [[0, 1, 0, 0] if i % 2 else values for i, values in enumerate(tasks)]
    for candidate, expected in ((worse, BLOCK), (tasks, None)):
        gate, run = live_gate(baseline, ["reward.score"], 0.0), RunState("cand")
        events = many("cand", candidate, attempts=4)
        decided_at = None
        for number, event in enumerate(events[:-1]):
            apply(run, event)
            gate.after(run, getattr(event, "task_id", None))
            if decided_at is None and gate.decision(closed=False) is not None:
                decided_at = number
        assert gate.decision(closed=False) == expected
        if expected is BLOCK:
            assert decided_at is not None
            assert decided_at < len(events) - 2  # before the last trial
            assert gate.look("reward.score").interval[1] < 0.0
        else:
            assert decided_at is None
            assert gate.look("reward.score").interval[0] < 0.0 < gate.look("reward.score").interval[1]
            apply(run, events[-1])
            gate.after(run, None)
            assert gate.decision(closed=True) == INCONCLUSIVE  # at the close, a drop neither shown nor ruled out


def test_a_regression_within_the_threshold_is_ruled_out() -> None:
    tasks = [[1, 1, 1, 1]] * 200
    baseline = summary_of(many("base", tasks), "base")
    gate, run = live_gate(baseline, None, 0.5), RunState("cand")
    feed(gate, run, many("cand", [[1, 1, 1, 0]] * 200, attempts=4)[:-1])  # a drop of 0.25 on every task, no close
    low, high = gate.look("reward.score").interval
    assert -0.5 < low <= high < 0.0
    assert gate.decision(closed=False) == WARN  # a real drop, within the tolerance: decided before the close


def test_several_keys_share_alpha_and_unknown_keys_are_refused() -> None:
    spec = task_spec("a", {"reward.score": "continuous", "judge.pass": "boolean"})
    baseline = summary_of(
        [
            started("base", [spec]),
            score("a", "a-0", "reward", {"score": 1}, run_id="base"),
            score("a", "a-0", "judge", {"pass": True}, run_id="base"),
            closed("base"),
        ],
        "base",
    )
    gate = live_gate(baseline, None, 0.0)
    assert {key: sequence.alpha for key, sequence in gate.sequences.items()} == {
        "judge.pass": 0.025,
        "reward.score": 0.025,
    }
    assert live_gate(baseline, ["judge.pass"], 0.0).sequences["judge.pass"].alpha == 0.05
    with pytest.raises(NotComparable, match=r"'steps.count' is not a pass@k key of the baseline 'base'"):
        live_gate(baseline, ["steps.count"], 0.0)


attempt_lists = st.dictionaries(
    st.sampled_from([f"t{i}" for i in range(8)]),
    st.lists(st.sampled_from([0, 1, 0.5, None, "NaN"]), max_size=4),
    min_size=1,
)


def pairs_by_position(baseline: dict[str, list[object]], candidate: dict[str, list[object]]) -> list[float]:
    """Each candidate attempt less the baseline's of the same position, computed apart from the gate."""

    def passes(value: object) -> int:
        return int(isinstance(value, int | float) and value >= 1)

    return [
        passes(mine) - passes(theirs)
        for task, values in candidate.items()
        for mine, theirs in zip(values, baseline.get(task, []), strict=False)
    ]


@given(attempt_lists, attempt_lists, st.randoms(use_true_random=False))
def test_the_pairs_are_the_same_whatever_the_order_the_tasks_interleave(
    baseline_attempts: dict[str, list[object]], candidate_attempts: dict[str, list[object]], rng: random.Random
) -> None:
    baseline = summary_of(scored_run("base", baseline_attempts), "base")
    events = scored_run("cand", candidate_attempts)
    middle = events[1:-1]
    rng.shuffle(middle)  # a harness's interleaving: a task's own attempts may move too, their order aside
    by_task: dict[str, list[InputEvent]] = {}
    for event in events[1:-1]:
        by_task.setdefault(str(getattr(event, "task_id", "")), []).append(event)
    # Keep each task's attempts in their order (its k-th attempt stays k-th), tasks interleaved at random.
    interleaved = [by_task[str(getattr(event, "task_id", ""))].pop(0) for event in middle]
    gate, run = live_gate(baseline, None, 0.0), RunState("cand")
    feed(gate, run, [events[0], *interleaved, events[-1]])
    expected = pairs_by_position(baseline_attempts, candidate_attempts)
    look = gate.look("reward.score")
    assert look.pairs == len(expected)
    if expected:
        assert look.mean == pytest.approx(sum(expected) / len(expected))
    else:
        assert look.mean is None


@given(st.integers(1, 4), st.lists(st.tuples(st.lists(st.sampled_from([0, 1]), min_size=4, max_size=4)), min_size=1))
def test_with_the_same_attempts_per_task_the_mean_at_the_close_is_the_fixed_gates(
    attempts: int, rows: list[tuple[list[int]]]
) -> None:
    baseline_attempts = {f"t{i}": row[0][:attempts] for i, row in enumerate(rows)}
    candidate_attempts = {f"t{i}": row[0][::-1][:attempts] for i, row in enumerate(rows)}
    baseline = summary_of(scored_run("base", baseline_attempts), "base")
    gate, run = live_gate(baseline, None, 0.0), RunState("cand")
    feed(gate, run, scored_run("cand", candidate_attempts))
    (key,) = compare(baseline, summary_of(scored_run("cand", candidate_attempts), "cand")).keys
    look = gate.look("reward.score")
    assert look.paired == len(key.tasks)
    assert key.mean_difference is not None
    assert look.mean == pytest.approx(key.mean_difference)
    assert gate.decision(closed=True) is not None
