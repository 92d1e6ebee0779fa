"""The retry list (projections.analysis.retry): what each task lacks against attempts_per_task."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events import not_retried
from projections.analysis.retry import KeyShortfall, Retry, retries
from tests.builders import broken, closed, dead, score, scored_run, started, summary_of, task_spec


def test_dead_and_missing_attempts_are_listed_with_what_each_task_lacks() -> None:
    events = scored_run("r", {"a": [1, 1, 1], "b": [1, None, 0], "c": [1], "d": [], "e": [None, 0, 1, 1, None, 1]})
    events.insert(-1, broken("c", "c-9", "reward", run_id="r"))  # a metric failure: no attempt
    assert retries(summary_of(events, "r"), 3) == [
        Retry("b", 1, ("b-1",), {"reward.score": KeyShortfall(measured=2, dead=1, lacks=1)}),
        Retry("c", 2, (), {"reward.score": KeyShortfall(1, 0, 2)}),
        Retry("d", 3, (), {"reward.score": KeyShortfall(0, 0, 3)}),
        # e has two dead attempts but four measured ones: nothing to run again.
    ]
    assert retries(summary_of(events, "r"), 1) == [Retry("d", 1, (), {"reward.score": KeyShortfall(0, 0, 1)})]
    with pytest.raises(ValueError, match="attempts_per_task is at least 1, got 0"):
        retries(summary_of(events, "r"), 0)


def test_a_task_lacks_what_its_most_lacking_key_lacks() -> None:
    spec = task_spec("t", {"reward.score": "continuous", "judge.pass": "boolean", "steps.count": "discrete"})
    events = [
        started("r", [spec]),
        score("t", "t-0", "reward", {"score": 1}, run_id="r"),
        score("t", "t-0", "judge", {"pass": True}, run_id="r"),
        score("t", "t-1", "reward", {"score": 0}, run_id="r"),
        dead("t", "t-1", "judge", run_id="r"),
        closed("r"),
    ]
    (retry,) = retries(summary_of(events, "r"), 2)
    assert retry == Retry(  # steps.count is no pass@k key: not counted
        "t", 1, ("t-1",), {"judge.pass": KeyShortfall(1, 1, 1), "reward.score": KeyShortfall(2, 0, 0)}
    )


attempt_lists = st.dictionaries(
    st.sampled_from([f"t{i}" for i in range(6)]),
    st.lists(st.sampled_from([0, 1, 0.5, None, "NaN"]), max_size=6),
    min_size=1,
)


@given(attempt_lists, st.integers(1, 6))
def test_running_what_is_listed_completes_every_task(attempts: dict[str, list[object]], per_task: int) -> None:
    summary = summary_of(scored_run("r", attempts), "r")
    listed = {retry.task_id: retry.lacks for retry in retries(summary, per_task)}
    topped_up = {task: [*values, *[1] * listed.get(task, 0)] for task, values in attempts.items()}
    assert retries(summary_of(scored_run("r", topped_up), "r"), per_task) == []
    for task, values in attempts.items():
        assert listed.get(task, 0) == max(0, per_task - sum(value is not None for value in values))


def test_trials_the_harness_would_not_retry_are_not_lacking() -> None:
    """The `not_retried` label (Harbor's rule, written by its importer) names unmeasured
    trials, dead or with a failed metric, that the harness would not run again."""
    label = not_retried.encode({"b": ["b-1"], "c": ["c-9"], "d": ["d-7", "d-8"]})
    events = scored_run("r", {"a": [1, 1, 1], "b": [1, None, None], "c": [1], "d": []}, labels={"not_retried": label})
    events.insert(-1, broken("c", "c-9", "reward", run_id="r"))
    assert retries(summary_of(events, "r"), 3) == [
        Retry("b", 1, ("b-1", "b-2"), {"reward.score": KeyShortfall(1, 2, 1, not_retried=1)}, ("b-1",)),
        Retry("c", 1, (), {"reward.score": KeyShortfall(1, 0, 1, not_retried=1)}, ("c-9",)),
        Retry("d", 1, (), {"reward.score": KeyShortfall(0, 0, 1, not_retried=2)}, ("d-7", "d-8")),
    ]
    assert retries(summary_of(events, "r"), 2) == []  # each: measured and settled make two
    measured_anyway = scored_run("r", {"a": [1, 0]}, labels={"not_retried": not_retried.encode({"a": ["a-0"]})})
    assert retries(summary_of(measured_anyway, "r"), 3) == [
        Retry("a", 1, (), {"reward.score": KeyShortfall(2, 0, 1, not_retried=0)}, ("a-0",))
    ]


@pytest.mark.parametrize("label", ["{", '["a"]', '{"a": "a-0"}', '{"a": [1]}'])
def test_a_malformed_not_retried_label_is_named(label: str) -> None:
    summary = summary_of(scored_run("r", {"a": [1]}, labels={"not_retried": label}), "r")
    with pytest.raises(ValueError, match="label 'not_retried' is not"):
        retries(summary, 2)


@given(attempt_lists, st.integers(1, 6), st.data())
def test_settled_trials_count_as_attempts_that_will_not_come(
    attempts: dict[str, list[object]], per_task: int, data: st.DataObject
) -> None:
    """Whatever unmeasured trials the label settles, a task lacks attempts_per_task minus its
    measured and settled trials; without the label, what it lacked before."""
    dead = {
        task: [f"{task}-{n}" for n, value in enumerate(values) if value is None] for task, values in attempts.items()
    }
    settled = {task: data.draw(st.lists(st.sampled_from(names), unique=True)) for task, names in dead.items() if names}
    label = {"not_retried": not_retried.encode(settled)}
    listed = {
        retry.task_id: retry for retry in retries(summary_of(scored_run("r", attempts, labels=label), "r"), per_task)
    }
    for task, values in attempts.items():
        measured = sum(value is not None for value in values)
        lacks = max(0, per_task - measured - len(settled.get(task, [])))
        assert (listed[task].lacks if task in listed else 0) == lacks
        if task in listed:
            assert listed[task].not_retried == tuple(settled.get(task, ()))
