"""`run.progress`: live figures of a run (EVENTS.md, "run.progress"; SEMANTICS.md 7).

pass@k figures and `statistics` come from the summary's own `statistics` (section 8),
whose pass@k count, nan_count and mean are `center`'s, the part of `range_aggregate` they
show, over the same per-task figures, so a progress event says exactly what
`summary.scores` and `statistics` would for the events applied so far (declared tasks that
nothing has arrived for count as unmeasured there, and as `pending` in the verdicts).
"""

from __future__ import annotations

from typing import Any

from projections.assembly.attempts import summary_tasks
from projections.assembly.contributions import SummaryCache
from projections.assembly.key_figures import key_figures
from projections.figures.passk import KeyFigures
from projections.fold.declarations import key_name
from projections.fold.run import RunState

Progress = dict[str, Any]


def progress(run: RunState, seq: int, elapsed: float | None = None, cache: SummaryCache | None = None) -> Progress:
    """The `run.progress` event number `seq` of this run.

    `elapsed`: seconds the run has been going, for the ETA; by default the span of the
    applied events' `occurred_at` (no ETA without either). `cache`: the run's summary cache,
    which keeps its pass@k figures between events (without one they are computed afresh).
    """
    declared = run.declarations.tasks if run.declarations else {}
    open_ = not run.closed
    pending = sum(1 for task_id in declared if not run.tasks[task_id].touched) if open_ else 0
    figured = key_figures(run, SummaryCache() if cache is None else cache)
    keys = [(name, key) for name, key in figured if key.statistics is not None]
    figures = {name: key.statistics for name, key in keys}
    pass_at_k = {name: _pass_at_k(key) for name, key in keys}
    verdicts = {}
    tallies = list(run.passk.values())
    # By name, then by place for equal names (as a stable sort by name): sorted() of tuples
    # is a C call in the compiled fold, and with a key function a Python one per item.
    for name, at in sorted([(key_name(key), at) for at, key in enumerate(run.passk)]):
        tally = tallies[at]
        waiting = tally.pending if open_ else 0
        verdicts[name] = {**tally.verdicts, "unmeasured": tally.unmeasured - waiting, "pending": waiting}
    finished = run.trials_completed + run.trials_failed
    expected = None
    if run.declarations and run.declarations.attempts_per_task:
        expected = run.declarations.attempts_per_task * len(declared)
    if elapsed is None:
        elapsed = run.span()
    return {
        "schema_version": 1,
        "type": "run.progress",
        "run_id": run.run_id,
        "seq": seq,
        "status": "open" if open_ else "closed",
        "event_count": run.event_count,
        "tasks": {
            "declared": len(declared),
            "with_attempts": sum(1 for task in summary_tasks(run) if task.attempted()),
            "pending": pending,
        },
        "trials": {
            "finished": finished,
            "failed": run.trials_failed,
            "expected": expected,
            "percent_done": None if not expected else round(min(100.0, 100.0 * finished / expected), 2),
        },
        "scores_applied": run.score_count,
        "pass_at_k": pass_at_k,
        "statistics": figures,
        "verdicts": verdicts,
        "eta_seconds": _eta(finished, expected, elapsed, open_),
    }


def _pass_at_k(key: KeyFigures) -> dict[str, dict[str, Any]]:
    """Each k's mean, count and nan_count, from its column's center (its section 8 entry
    holds the same): read from the typed center, not the entry's dict, a Python lookup each."""
    shown = {}
    for index, column in enumerate(key.at_k):
        middle = column.middle
        shown[str(index + 1)] = {"mean": middle.mean, "count": middle.count, "nan_count": middle.nan_count}
    return shown


def _eta(finished: int, expected: int | None, elapsed: float | None, open_: bool) -> float | None:
    if not open_ or (expected is not None and finished >= expected):
        return 0.0
    if expected is None or not finished or not elapsed or elapsed <= 0:
        return None
    return round((expected - finished) * elapsed / finished, 1)
