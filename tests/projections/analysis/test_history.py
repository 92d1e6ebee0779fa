"""A task across runs (projections.analysis.history): a hand-made example, and the laws of the packed
record and of the verdict changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.analysis.compare import compare
from projections.analysis.history import Outcome, RunTasks, history, run_tasks
from tests.builders import scored_run, summary_of


def run_of(run_id: str, attempts: Mapping[str, Sequence[object]], at: float, **labels: str) -> RunTasks:
    return run_tasks(summary_of(scored_run(run_id, attempts, labels=labels), run_id), at)


KEY = "reward.score"


def test_a_task_in_each_run_oldest_first_and_the_tasks_that_flipped() -> None:
    runs = [
        run_of("r3", {"a": [1.0, 1.0], "b": [0.0, 0.0], "c": [1.0]}, 30.0, benchmark="x"),
        run_of("r1", {"a": [1.0, 0.0], "b": [1.0, 1.0], "c": [1.0]}, 10.0, benchmark="x"),
        run_of("r2", {"a": [0.0, 0.0], "b": [1.0, 1.0], "c": []}, 20.0, benchmark="x"),
        run_of("other", {"a": [1.0, 1.0]}, 15.0, benchmark="y"),
    ]
    shown = history(runs, {"benchmark": "x"}, "a")
    assert shown.runs == ("r1", "r2", "r3")
    assert [(run.run_id, run.outcomes[KEY]) for run in shown.task] == [
        ("r1", Outcome("flaky", 1, 2, 0.5)),
        ("r2", Outcome("failed", 0, 2, 0.0)),
        ("r3", Outcome("solved", 2, 2, 1.0)),
    ]
    # a: flaky -> failed -> solved (2); b: solved -> solved -> failed (1, first in r3);
    # c: solved, unmeasured (passed over), solved: no change.
    assert [
        (flip.task_id, flip.changes, flip.measured, flip.first_changed_in, flip.last_verdict) for flip in shown.flips
    ] == [
        ("a", 2, 3, "r2", "solved"),
        ("b", 1, 3, "r3", "failed"),
    ]


def test_labels_combine_and_a_missing_task_is_no_outcome() -> None:
    runs = [
        run_of("m1", {"a": [1.0]}, 1.0, benchmark="x", model="m1"),
        run_of("m2", {"b": [1.0]}, 2.0, benchmark="x", model="m2"),
    ]
    assert history(runs, {"benchmark": "x", "model": "m2"}).runs == ("m2",)
    assert history(runs, {}).runs == ("m1", "m2")
    assert [run.outcomes for run in history(runs, {"benchmark": "x"}, "a").task] == [
        {KEY: Outcome("solved", 1, 1, 1.0)},
        {},
    ]


values = st.lists(st.sampled_from([1.0, 0.0, 0.5, None]), max_size=4)
attempt_maps = st.dictionaries(st.sampled_from(["a", "b", "c"]), values, min_size=1, max_size=3)


@settings(max_examples=40, deadline=None)
@given(st.lists(attempt_maps, min_size=1, max_size=5))
def test_the_packed_record_gives_back_each_verdict_and_the_pass_rate_compare_uses(
    maps: list[dict[str, list[object]]],
) -> None:
    summaries = [summary_of(scored_run(f"r{index}", attempts), f"r{index}") for index, attempts in enumerate(maps)]
    runs = [run_tasks(summary, float(index)) for index, summary in enumerate(summaries)]
    for summary, packed in zip(summaries, runs, strict=True):
        for task_id, by_key in summary.verdicts.items():
            assert {key: outcome.verdict for key, outcome in packed.outcomes(task_id).items()} == by_key
    # The pass rates are compare's: a run against itself pairs each measured task with its own rate.
    for summary, packed in zip(summaries, runs, strict=True):
        for key in compare(summary, summary).keys:
            for task in key.tasks:
                assert packed.outcomes(task.task_id)[key.key].pass_rate == task.baseline
    # A change is two consecutive measured runs with different verdicts, counted per task and key.
    shown = history(runs, {})
    for task_id in ("a", "b", "c"):
        verdicts = [
            run.outcomes(task_id)[KEY].verdict
            for run in runs
            if KEY in run.outcomes(task_id) and run.outcomes(task_id)[KEY].verdict != "unmeasured"
        ]
        changes = sum(before != after for before, after in pairwise(verdicts))
        found = [flip for flip in shown.flips if flip.task_id == task_id]
        assert [(flip.changes, flip.measured, flip.last_verdict) for flip in found] == (
            [(changes, len(verdicts), verdicts[-1])] if changes else []
        )
