"""What each page shows for a progress or summary event (`worker.dashboard.views`)."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from events.models import InputEvent
from events.synthetic import synthetic_run
from projections.compare import compare
from tests.builders import closed, dead, score, started, task_spec, trial
from tests.worker.dashboard.outputs import latest, outputs
from worker.dashboard.views import (
    Cell,
    RunRecords,
    compare_view,
    key_figures,
    progress_figures,
    run_row,
    run_view,
    sort_key,
    summary_figures,
)

REWARD = {"reward.score": "continuous"}


def reward(task_id: str, trial_id: str, value: object) -> InputEvent:
    return score(task_id, trial_id, "reward", {"score": value})


def open_run() -> list[InputEvent]:
    """Three tasks, two attempts each planned; t1 solved once, t2 half-way, t3 untouched."""
    return [
        started(tasks=[task_spec(t, REWARD) for t in ("t1", "t2", "t3")], attempts_per_task=2, labels={"m": "x"}),
        trial("t1", "a"),
        reward("t1", "a", 1.0),
        trial("t2", "b", "failed", error_type="SandboxTimeout"),
        dead("t2", "b", "reward"),
    ]


def test_an_open_run_shows_its_progress_event() -> None:
    records = latest(open_run(), at=50.0)
    progress = records.progress
    assert progress is not None
    assert records.summary is None
    row = run_row(records)
    assert row.status == "open"
    assert (row.trials_done, row.trials_expected, row.dead_trials) == (2, 6, 1)
    assert row.percent_done == progress.trials.percent_done
    assert row.eta_seconds == progress.eta_seconds
    assert row.pass_at_1 == {"reward.score": progress.pass_at_k["reward.score"]["1"].mean}
    assert (row.seq, row.revision, row.moved_at, row.labels) == (progress.seq, None, 50.0, {})
    view = run_view(records)
    assert view.figures_from == "progress"
    assert (view.tasks_declared, view.tasks_with_attempts, view.tasks_pending) == (3, 2, 1)
    [key] = view.keys
    assert key.verdicts == {"solved": 1, "flaky": 0, "failed": 1, "unmeasured": 0, "pending": 1}
    assert view.problem_tasks == ()  # per-task detail only comes with a summary
    assert view.errors == {}


def test_a_runs_figures_carry_its_records_intervals_and_pass_hat_k() -> None:
    """From the progress event while open, from the summary once closed: section 8 as said."""
    events = [
        started(tasks=[task_spec(t, REWARD) for t in ("t1", "t2", "t3")], attempts_per_task=2),
        *(reward(t, f"{t}-{n}", value) for t, values in {"t1": (1, 1), "t2": (1, 0), "t3": (0, 0)}.items()
          for n, value in enumerate(values)),
    ]  # fmt: skip
    for records in (latest(events), latest([*events, closed()])):
        record = records.summary or records.progress
        assert record is not None
        said = record.statistics
        [key] = key_figures(records)
        for estimates, entries in ((key.intervals, said["reward.score"].pass_at_k),
                                   (key.pass_hat, said["reward.score"].pass_hat_k)):  # fmt: skip
            assert [(e.k, e.mean, e.count, e.stderr, e.low, e.high) for e in estimates] == [
                (e.k, e.mean, e.count, e.stderr, e.ci95_low, e.ci95_high) for e in entries
            ]
        assert [e.mean for e in key.pass_hat] == [0.5, 1 / 3]
        assert key.interval_at(1) == key.intervals[0]
        assert key.intervals[0].low is not None


def test_a_closed_run_shows_its_summary_figures_and_detail() -> None:
    events = [
        *open_run(),
        trial("t1", "c"),
        reward("t1", "c", 0.5),
        trial("t2", "d"),
        reward("t2", "d", "NaN"),
        trial("t3", "e"),
        reward("t3", "e", 1.0),
        closed(reason="cancelled"),
    ]
    records = latest(events, at=60.0)
    summary = records.summary
    assert summary is not None
    view = run_view(records)
    assert view.figures_from == "summary"
    assert view.row.status == "closed"
    assert view.row.closed_reason == "cancelled"
    assert view.row.revision == summary.revision == 1
    assert view.row.labels == {"m": "x"}
    assert view.row.eta_seconds is None
    [key] = view.keys
    by_name = {score.name: score for score in summary.summary.scores}
    for figure in key.pass_at:
        own = by_name[f"reward.score.pass@{figure.k}"]
        assert (figure.mean, figure.count, figure.nan_count) == (own.mean, own.count, own.nan_count)
    assert [figure.k for figure in key.pass_at] == [1, 2]
    assert key.verdicts == {"solved": 1, "flaky": 1, "failed": 1, "unmeasured": 0, "pending": 0}
    [tasks] = view.problem_tasks
    assert [(task.task_id, task.verdict) for task in tasks.tasks] == [("t1", "flaky"), ("t2", "failed")]
    t1, t2 = tasks.tasks
    assert t1.cells == (Cell("a", "passed", 1.0), Cell("c", "failed", 0.5))
    assert t2.cells[0] == Cell("b", "dead", None)
    assert t2.cells[1].outcome == "failed"
    assert t2.cells[1].value is not None
    assert math.isnan(t2.cells[1].value)  # NaN never passes
    assert view.errors == {"SandboxTimeout": 1}


def test_a_run_known_only_by_its_summary() -> None:
    records = latest([*open_run(), closed()])
    only = replace(records, progress=None, progress_at=None)
    row = run_row(only)
    summary = records.summary
    assert summary is not None
    assert row.status == "closed"
    assert (row.trials_done, row.trials_expected, row.dead_trials) == (summary.summary.trial_count, None, 1)
    assert row.percent_done == 100.0
    assert row.seq is None


def test_a_run_is_closed_when_either_record_says_so() -> None:
    progress, summaries = outputs([*open_run(), closed()])
    early = RunRecords("run", progress=progress[-2], progress_at=1.0, summary=summaries[-1], summary_at=2.0)
    assert progress[-2].status == "open"
    assert run_row(early).status == "closed"
    assert run_row(early).moved_at == 2.0


def test_no_pass_at_k_keys_without_declarations() -> None:
    records = latest([trial("t", "a"), score("t", "a", "reward", {"score": 1.0})])
    assert key_figures(records) == ()
    assert run_row(records).pass_at_1 == {}


def test_open_runs_come_first_the_newest_first_and_stay_put_as_they_move() -> None:
    progress, _ = outputs(open_run())
    closed_records = latest([*open_run(), closed()], at=300.0)

    def open_(run_id: str, first: float, moved: float) -> RunRecords:
        return RunRecords(run_id, progress=progress[-1], progress_at=moved, first_at=first)

    rows = [
        run_row(open_("old", 100.0, 290.0)),
        run_row(replace(closed_records, run_id="done-early", summary_at=150.0, progress_at=150.0)),
        run_row(replace(closed_records, run_id="done")),
        run_row(open_("new", 200.0, 210.0)),
    ]
    assert [row.run_id for row in sorted(rows, key=sort_key)] == ["new", "old", "done", "done-early"]


@settings(max_examples=25, deadline=None)
@given(
    tasks=st.integers(1, 8),
    attempts=st.integers(1, 6),
    trial_failure=st.sampled_from([0.0, 0.2, 0.6]),
    metric_failure=st.sampled_from([0.0, 0.1, 0.5]),
    seed=st.integers(0, 1000),
)
def test_a_closed_run_shows_the_same_figures_from_its_summary_as_from_its_last_progress(
    tasks: int, attempts: int, trial_failure: float, metric_failure: float, seed: int
) -> None:
    """SEMANTICS.md section 7: the page does not change when the summary takes over."""
    progress, summaries = outputs(
        synthetic_run(
            "r",
            tasks=tasks,
            attempts=attempts,
            trial_failure_rate=trial_failure,
            metric_failure_rate=metric_failure,
            seed=seed,
        )
    )
    assert progress[-1].status == "closed"
    assert summary_figures(summaries[-1]) == progress_figures(progress[-1])


def two_runs() -> tuple[RunRecords, RunRecords]:
    """t1 regresses (solved -> failed), t2 is fixed, t3 is the candidate's only."""

    def run(run_id: str, values: dict[str, tuple[float, float]], benchmark: str) -> RunRecords:
        events: list[InputEvent] = [
            started(run_id, [task_spec(t, REWARD) for t in values], labels={"benchmark": benchmark})
        ]
        for task_id, attempts in values.items():
            for number, value in enumerate(attempts):
                events += [trial(task_id, f"{task_id}-{number}", run_id=run_id)]
                events += [score(task_id, f"{task_id}-{number}", "reward", {"score": value}, run_id=run_id)]
        return latest([*events, closed(run_id)])

    baseline = run("base", {"t1": (1.0, 1.0), "t2": (0.0, 0.0)}, "b")
    candidate = run("cand", {"t1": (0.0, 0.0), "t2": (1.0, 0.0), "t3": (1.0, 1.0)}, "b")
    return baseline, candidate


def test_two_runs_are_compared_by_projections_compare() -> None:
    baseline, candidate = two_runs()
    view = compare_view("base", baseline, "cand", candidate)
    assert view.waiting_for == ()
    assert view.benchmarks == ("b", "b")
    comparison = view.comparison
    assert comparison is not None
    assert baseline.summary is not None
    assert candidate.summary is not None
    assert comparison == compare(baseline.summary, candidate.summary)
    [key] = comparison.keys
    assert [(c.task_id, c.baseline, c.candidate) for c in key.regressions] == [("t1", "solved", "failed")]
    assert [(c.task_id, c.baseline, c.candidate) for c in key.fixes] == [("t2", "failed", "flaky")]
    assert comparison.only_candidate_tasks == ("t3",)


def test_a_comparison_waits_for_both_summaries() -> None:
    baseline, candidate = two_runs()
    open_candidate = replace(candidate, summary=None, summary_at=None)
    view = compare_view("base", baseline, "cand", open_candidate)
    assert view.comparison is None
    assert view.waiting_for == ("cand",)
    nothing = compare_view("base", baseline, "gone", None)
    assert nothing.candidate is None
    assert nothing.waiting_for == ("gone",)
