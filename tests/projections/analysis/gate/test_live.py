"""The live gate's fold (projections.analysis.gate.live): what one observation is, and when it decides."""

from __future__ import annotations

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


def test_a_task_counts_once_its_attempts_are_complete_and_stays_as_it_was() -> None:
    gate, run = live_gate(BASELINE, None, 0.0), RunState("cand")
    looks = feed(
        gate,
        run,
        [
            declared("a", "b", "c", "u", "x"),
            reward("a", "a-0", 0),  # one of two: not yet
            broken("a", "a-1", "reward"),  # a metric failure is no attempt
            dead("a", "a-2", "reward"),  # a dead trial is one that did not pass: a is complete, 0/2 vs 2/2
            reward("a", "a-3", 1),  # later attempts change nothing counted
            reward("b", "b-0", 1),
            reward("b", "b-1", 1),  # 2/2 vs 1/2
            reward("u", "u-0", 1),
            reward("u", "u-1", 1),  # the baseline never measured u: not paired
            reward("x", "x-0", 1),
            reward("x", "x-1", 1),  # nor has x
        ],
    )
    assert [len(each) for each in looks] == [0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0]
    assert looks[3] == [Look("reward.score", 1, -1.0, (-1.0, 1.0), INCONCLUSIVE)]
    assert looks[6][0].paired == 2
    assert looks[6][0].mean == pytest.approx(-0.25)
    assert gate.observed == {"reward.score": {"a", "b"}}
    assert gate.decision(closed=False) is None


def test_at_the_close_every_measured_task_left_is_counted() -> None:
    gate, run = live_gate(BASELINE, None, 0.0), RunState("cand")
    looks = feed(gate, run, [declared("a", "b", "c", attempts=None), reward("a", "a-0", 1), reward("c", "c-0", 1)])
    assert looks == [[], [], []]  # no attempts_per_task: nothing is complete before the close
    (at_close,) = feed(gate, run, [closed("cand")])
    assert at_close[0].paired == 2  # a (1/1 vs 2/2) and c (1/1 vs 0/2); b has no attempt
    assert at_close[0].mean == pytest.approx(0.5)
    assert gate.decision(closed=True) == INCONCLUSIVE  # closed, and two tasks settle nothing


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


@given(attempt_lists, attempt_lists)
def test_at_the_close_it_pairs_what_the_fixed_gate_pairs(
    baseline_attempts: dict[str, list[object]], candidate_attempts: dict[str, list[object]]
) -> None:
    baseline = summary_of(scored_run("base", baseline_attempts), "base")
    gate, run = live_gate(baseline, None, 0.0), RunState("cand")
    feed(gate, run, scored_run("cand", candidate_attempts))  # no attempts_per_task: all at the close
    (key,) = compare(baseline, summary_of(scored_run("cand", candidate_attempts), "cand")).keys
    assert gate.observed.get("reward.score", set()) == {task.task_id for task in key.tasks}
    look = gate.look("reward.score")
    assert look.paired == len(key.tasks)
    if key.mean_difference is not None:
        assert look.mean == pytest.approx(key.mean_difference)
    assert gate.decision(closed=True) is not None
