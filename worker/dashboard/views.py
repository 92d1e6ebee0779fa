"""What each page shows, as pure functions of a run's latest `run.progress` and `run.summary`.

No figure is computed here: pass@k, verdict counts, trial counts and the ETA are the
events' own. What this module decides is which record a figure is taken from:
- a run's figures (pass@k, pass^k and their 95% intervals, verdict counts) come from its
  summary once it has one (the run's truth, EVENTS.md), else from its latest progress event;
  SEMANTICS.md sections 7 and 8 say the two agree for the same events. Verdict counts of a
  summary are its `verdicts` counted per key;
- trial counts, pending tasks and the ETA exist only in progress events. A run known only by
  its summary (its progress aged out of the progress topic) shows the summary's `trial_count`
  (distinct trials scored) as trials done and no expected count or ETA;
- a run is closed when either record says so (a summary exists only for a closed run);
- per-task detail (the attempts of flaky and failed tasks, error types, labels) exists only
  in summaries, so it appears when a run closes. An attempt is a cell: passed (projections'
  `passes`: not null and >= 1.0), dead (null: the trial died) or failed (anything else,
  NaN included), in the summary's order, which is log order;
- two runs are compared by `projections.analysis.compare` (the function `evalstream gate` uses), on
  their summaries, so the two-run view fills in once both are closed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from events.nonfinite import NONFINITE_STRINGS, read_float
from events.outputs import Attempt, Interval, KeyStatistics, PassAtK, RunProgress, RunSummary
from projections.analysis.compare import Comparison, PassAt, compare
from projections.figures.passk import passes
from projections.figures.verdicts import FAILED, FLAKY, PENDING, SOLVED, UNMEASURED

VERDICTS = (SOLVED, FLAKY, FAILED, UNMEASURED, PENDING)
Outcome = Literal["passed", "failed", "dead"]


@dataclass(frozen=True, slots=True)
class RunRecords:
    """The latest records of one run the dashboard holds, with when each was published
    (the Kafka record's timestamp, seconds since the epoch)."""

    run_id: str
    progress: RunProgress | None = None
    progress_at: float | None = None
    summary: RunSummary | None = None
    summary_at: float | None = None
    first_at: float | None = None
    """The earliest publication of a record of the run the dashboard has read."""

    @property
    def moved_at(self) -> float | None:
        """When the run last moved: its newest record's publication."""
        times = [at for at in (self.progress_at, self.summary_at) if at is not None]
        return max(times) if times else None


@dataclass(frozen=True, slots=True)
class Estimate:
    """One k of pass@k or pass^k with its 95% interval (SEMANTICS.md section 8), as the record
    says it: no interval (None) below two tasks."""

    k: int
    mean: float | None
    count: int
    stderr: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True, slots=True)
class KeyFigures:
    """One pass@k key: pass@1..K, their intervals, pass^1..K and the count of tasks of each verdict."""

    key: str
    pass_at: tuple[PassAt, ...]
    """By k, ascending."""
    verdicts: dict[str, int]
    """solved, flaky, failed, unmeasured, pending (0 once closed)."""
    intervals: tuple[Estimate, ...] = ()
    """pass@k's by k, ascending, from the same record's `statistics` (none: no measured task)."""
    pass_hat: tuple[Estimate, ...] = ()
    """pass^k by k, ascending, with its intervals."""

    def interval_at(self, k: int) -> Estimate | None:
        return next((estimate for estimate in self.intervals if estimate.k == k), None)

    def mean_at(self, k: int) -> float | None:
        return next((figure.mean for figure in self.pass_at if figure.k == k), None)


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run on the runs page."""

    run_id: str
    status: Literal["open", "closed"]
    closed_reason: str | None
    trials_done: int | None
    trials_expected: int | None
    percent_done: float | None
    dead_trials: int | None
    eta_seconds: float | None
    pass_at_1: dict[str, float | None]
    """Per key, in key order."""
    labels: dict[str, str]
    moved_at: float | None
    first_at: float | None
    seq: int | None
    """The progress event shown (None: none yet)."""
    revision: int | None
    """The summary shown (None: none yet)."""


@dataclass(frozen=True, slots=True)
class Cell:
    trial_id: str
    outcome: Outcome
    value: float | None


@dataclass(frozen=True, slots=True)
class TaskCells:
    task_id: str
    verdict: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class KeyTasks:
    """The flaky tasks, then the failed ones, of one key, each in the summary's task order."""

    key: str
    tasks: tuple[TaskCells, ...]


@dataclass(frozen=True, slots=True)
class RunView:
    """A run's page."""

    row: RunRow
    figures_from: Literal["summary", "progress", "nothing"]
    keys: tuple[KeyFigures, ...]
    tasks_declared: int | None
    tasks_with_attempts: int | None
    tasks_pending: int | None
    scores_applied: int | None
    event_count: int | None
    problem_tasks: tuple[KeyTasks, ...]
    """Empty until the run has a summary."""
    errors: dict[str, int]
    """Error type -> trials that died of it (the summary's `harbor.exception_stats`)."""


def run_row(records: RunRecords) -> RunRow:
    progress, summary = records.progress, records.summary
    closed = summary is not None or (progress is not None and progress.status == "closed")
    trials = progress.trials if progress is not None else None
    figures = key_figures(records)
    return RunRow(
        run_id=records.run_id,
        status="closed" if closed else "open",
        closed_reason=summary.closed_reason if summary is not None else None,
        trials_done=trials.finished if trials is not None else summary.summary.trial_count if summary else None,
        trials_expected=trials.expected if trials is not None else None,
        percent_done=trials.percent_done if trials is not None else (100.0 if closed else None),
        dead_trials=trials.failed if trials is not None else summary.harbor.n_errors if summary else None,
        eta_seconds=progress.eta_seconds if progress is not None and not closed else None,
        pass_at_1={figure.key: figure.mean_at(1) for figure in figures},
        labels=dict(summary.labels) if summary is not None else {},
        moved_at=records.moved_at,
        first_at=records.first_at,
        seq=progress.seq if progress is not None else None,
        revision=summary.revision if summary is not None else None,
    )


def run_view(records: RunRecords) -> RunView:
    progress, summary = records.progress, records.summary
    return RunView(
        row=run_row(records),
        figures_from="summary" if summary is not None else "progress" if progress is not None else "nothing",
        keys=key_figures(records),
        tasks_declared=progress.tasks.declared if progress is not None else None,
        tasks_with_attempts=progress.tasks.with_attempts if progress is not None else None,
        tasks_pending=progress.tasks.pending if progress is not None else None,
        scores_applied=progress.scores_applied if progress is not None else None,
        event_count=summary.event_count if summary is not None else progress.event_count if progress else None,
        problem_tasks=problem_tasks(summary) if summary is not None else (),
        errors={kind: len(trials) for kind, trials in summary.harbor.exception_stats.items()} if summary else {},
    )


def key_figures(records: RunRecords) -> tuple[KeyFigures, ...]:
    if records.summary is not None:
        return summary_figures(records.summary)
    if records.progress is not None:
        return progress_figures(records.progress)
    return ()


def progress_figures(progress: RunProgress) -> tuple[KeyFigures, ...]:
    return tuple(
        KeyFigures(
            key,
            _by_k(progress.pass_at_k.get(key, {})),
            progress.verdicts[key].model_dump() if key in progress.verdicts else dict.fromkeys(VERDICTS, 0),
            *_estimates(progress.statistics.get(key)),
        )
        for key in sorted({*progress.verdicts, *progress.pass_at_k})
    )


def _estimates(statistics: KeyStatistics | None) -> tuple[tuple[Estimate, ...], tuple[Estimate, ...]]:
    """(pass@k, pass^k) of one key's `statistics`, each by k."""
    if statistics is None:
        return (), ()
    return _by_k_estimates(statistics.pass_at_k), _by_k_estimates(statistics.pass_hat_k)


def _by_k_estimates(entries: Iterable[Interval]) -> tuple[Estimate, ...]:
    found = (Estimate(e.k, e.mean, e.count, e.stderr, e.ci95_low, e.ci95_high) for e in entries)
    return tuple(sorted(found, key=lambda estimate: estimate.k))


def _by_k(figures: Mapping[str, PassAtK]) -> tuple[PassAt, ...]:
    found = (PassAt(int(k), figure.mean, figure.count, figure.nan_count) for k, figure in figures.items())
    return tuple(sorted(found, key=lambda figure: figure.k))


def summary_figures(summary: RunSummary) -> tuple[KeyFigures, ...]:
    """Each pass@k key's `<key>.pass@<k>` aggregates, its statistics, and its verdicts counted."""
    pass_at: dict[str, list[PassAt]] = {}
    for score in summary.summary.scores:
        key, marker, k = score.name.rpartition(".pass@")
        if marker and k.isdigit():
            pass_at.setdefault(key, []).append(PassAt(int(k), read_float(score.mean), score.count, score.nan_count))
    counted: dict[str, Counter[str]] = {}
    for by_key in summary.verdicts.values():
        for key, verdict in by_key.items():
            counted.setdefault(key, Counter())[verdict] += 1
    return tuple(
        KeyFigures(
            key,
            tuple(sorted(pass_at.get(key, ()), key=lambda figure: figure.k)),
            {verdict: counted.get(key, Counter())[verdict] for verdict in VERDICTS},
            *_estimates(summary.statistics.get(key)),
        )
        for key in sorted({*pass_at, *counted})
    )


def problem_tasks(summary: RunSummary) -> tuple[KeyTasks, ...]:
    """Per pass@k key, the tasks whose verdict is flaky or failed, with their attempts."""
    attempts = summary.summary.task_metric_attempts
    keys = sorted({key for by_key in summary.verdicts.values() for key in by_key})
    return tuple(
        KeyTasks(
            key,
            tuple(
                TaskCells(task_id, verdict, cells(attempts.get(task_id, {}).get(key, ())))
                for verdict in (FLAKY, FAILED)
                for task_id, by_key in summary.verdicts.items()
                if by_key.get(key) == verdict
            ),
        )
        for key in keys
    )


def cells(attempts: Iterable[Attempt]) -> tuple[Cell, ...]:
    return tuple(_cell(attempt) for attempt in attempts)


def _cell(attempt: Attempt) -> Cell:
    value = attempt.value
    number = NONFINITE_STRINGS[value] if isinstance(value, str) else value
    outcome: Outcome = "dead" if number is None else "passed" if passes(number) else "failed"
    return Cell(attempt.trial_id, outcome, number)


def sort_key(row: RunRow) -> str:
    """Where a run goes on the runs page: open runs first, the newest first (by the first record
    read of it), then closed runs, the latest closed first; then by id. Rows stay put while runs
    move. A string, so that the page's script keeps new rows in the same order."""
    at = row.first_at if row.status == "open" else row.moved_at
    return f"{row.status != 'open':d}:{10**15 - round((at or 0.0) * 1000):016d}:{row.run_id}"


@dataclass(frozen=True, slots=True)
class CompareView:
    """Two runs side by side: `projections.analysis.compare` of their summaries, once both have one."""

    baseline_id: str
    candidate_id: str
    baseline: RunRow | None
    """None: nothing of the run has arrived."""
    candidate: RunRow | None
    comparison: Comparison | None
    waiting_for: tuple[str, ...]
    """The runs with no summary yet (a run has one once it is closed)."""
    benchmarks: tuple[str | None, str | None]
    """Each run's `benchmark` label: two different ones are compared, with a warning."""


def compare_view(
    baseline_id: str, baseline: RunRecords | None, candidate_id: str, candidate: RunRecords | None
) -> CompareView:
    base_summary = baseline.summary if baseline is not None else None
    cand_summary = candidate.summary if candidate is not None else None
    waiting = tuple(
        run_id for run_id, summary in ((baseline_id, base_summary), (candidate_id, cand_summary)) if summary is None
    )
    return CompareView(
        baseline_id=baseline_id,
        candidate_id=candidate_id,
        baseline=run_row(baseline) if baseline is not None else None,
        candidate=run_row(candidate) if candidate is not None else None,
        comparison=compare(base_summary, cand_summary) if base_summary and cand_summary else None,
        waiting_for=tuple(dict.fromkeys(waiting)),
        benchmarks=(
            base_summary.labels.get("benchmark") if base_summary else None,
            cand_summary.labels.get("benchmark") if cand_summary else None,
        ),
    )
