"""What deserves an alert in the outputs, without a gate: pure rules over summaries and progress.

Three rules, each alert named by (run id, revision, rule), which is what makes it idempotent:
the same record read again (a restarted reader, a worker that published a revision twice) gives
the same name, and a sender that remembers the names it sent sends each once.
- `run-closed`: a run's summary, at each revision (revision 1 is its close; a later one, the
  figures a late event changed).
- `dead-trials`: a run's dead trials passed `threshold` of its finished trials, with at least
  `min_trials` finished (fewer say little: one dead trial of two is 50%). Read off progress,
  which the worker publishes while the run is open and at its close; revision 0 names it: once
  per run.
- `verdict-flip`: a task's verdict on a key differs from the previous run with the same values
  of the `match` labels (the run whose summary was read last before this run's first), where
  both measured it (no attempt, or no such task, is passed over). Once per revision of the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from events.outputs import RunProgress, RunSummary

RUN_CLOSED = "run-closed"
DEAD_TRIALS = "dead-trials"
VERDICT_FLIP = "verdict-flip"
RULES = (RUN_CLOSED, DEAD_TRIALS, VERDICT_FLIP)
_NOT_MEASURED = frozenset(("unmeasured", "pending"))


@dataclass(frozen=True, slots=True)
class Alert:
    run_id: str
    revision: int
    rule: str
    text: str
    """A sentence for people (a chat message)."""
    facts: Mapping[str, Any]
    """The same, as data."""

    @property
    def key(self) -> str:
        """The alert's identity: `run/revision/rule` (a run id may hold '/', so it comes first and
        the two others are read from the end)."""
        return f"{self.run_id}/{self.revision}/{self.rule}"

    def record(self) -> dict[str, Any]:
        return {"id": self.key, "run_id": self.run_id, "revision": self.revision, "rule": self.rule, **self.facts}


@dataclass(frozen=True)
class Rules:
    dead_threshold: float = 0.2
    """The share of finished trials that died past which a run alerts."""
    min_trials: int = 10
    match: Sequence[str] = ("benchmark",)
    """The labels whose values make two runs comparable for `verdict-flip`."""


def closed(summary: RunSummary) -> Alert:
    counts = _verdict_counts(summary)
    figures = ", ".join(f"{count} {verdict}" for verdict, count in counts.items() if count)
    what = "closed" if summary.revision == 1 else f"revised (revision {summary.revision})"
    return Alert(
        summary.run_id,
        summary.revision,
        RUN_CLOSED,
        f"run {summary.run_id} {what} ({summary.closed_reason}): {figures or 'no verdicts'}",
        {"closed_reason": summary.closed_reason, "labels": dict(summary.labels), "verdicts": counts},
    )


def dead_trials(run_id: str, finished: int, failed: int, rules: Rules) -> Alert | None:
    if finished < rules.min_trials or finished == 0 or failed / finished <= rules.dead_threshold:
        return None
    share = failed / finished
    return Alert(
        run_id,
        0,
        DEAD_TRIALS,
        f"run {run_id}: {failed} of {finished} finished trials died ({100 * share:.0f}%, "
        f"past {100 * rules.dead_threshold:.0f}%)",
        {"finished": finished, "failed": failed, "threshold": rules.dead_threshold},
    )


def progress_alerts(progress: RunProgress, rules: Rules) -> list[Alert]:
    found = dead_trials(progress.run_id, progress.trials.finished, progress.trials.failed, rules)
    return [] if found is None else [found]


def flips(previous: RunSummary, summary: RunSummary) -> list[dict[str, str]]:
    """Each (task, key) both runs measured whose verdict differs, in the summary's task order."""
    changed = []
    for task_id, keys in summary.verdicts.items():
        before = previous.verdicts.get(task_id, {})
        for key, verdict in sorted(keys.items()):
            was = before.get(key)
            if was is not None and was != verdict and not {was, verdict} & _NOT_MEASURED:
                changed.append({"task_id": task_id, "key": key, "from": was, "to": verdict})
    return changed


def summary_alerts(summary: RunSummary, previous: RunSummary | None, rules: Rules) -> list[Alert]:
    """The alerts of a summary revision, given the previous run of the same `match` labels."""
    alerts = [closed(summary)]
    if previous is not None:
        changed = flips(previous, summary)
        if changed:
            shown = "; ".join(f"{c['task_id']} {c['key']} {c['from']} -> {c['to']}" for c in changed[:5])
            more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
            alerts.append(
                Alert(
                    summary.run_id,
                    summary.revision,
                    VERDICT_FLIP,
                    f"run {summary.run_id}: {len(changed)} verdict{'s' if len(changed) > 1 else ''} changed since "
                    f"{previous.run_id}: {shown}{more}",
                    {"previous_run_id": previous.run_id, "flips": changed},
                )
            )
    return alerts


def match_key(summary: RunSummary, match: Sequence[str]) -> tuple[str | None, ...] | None:
    """The values of the `match` labels; None when the run has none of them (it matches no run)."""
    values = tuple(summary.labels.get(label) for label in match)
    return None if all(value is None for value in values) else values


@dataclass
class Previous:
    """The runs read so far, per `match` key: the last two distinct runs (so that a revision of
    the newest still finds the one before it) and the ids of older ones (a revision of one of
    those is compared with nothing: what came just before it is no longer held)."""

    match: Sequence[str]
    runs: dict[tuple[str | None, ...], list[RunSummary]] = field(default_factory=dict)
    older: set[str] = field(default_factory=set)

    def before(self, summary: RunSummary) -> RunSummary | None:
        """The run of the same labels read before `summary`'s run, and remember `summary`."""
        key = match_key(summary, self.match)
        if key is None or summary.run_id in self.older:
            return None
        kept = self.runs.setdefault(key, [])
        for index, run in enumerate(kept):
            if run.run_id == summary.run_id:
                kept[index] = summary
                return kept[index - 1] if index else None
        previous = kept[-1] if kept else None
        kept.append(summary)
        if len(kept) > 2:
            self.older.add(kept.pop(0).run_id)
        return previous


def _verdict_counts(summary: RunSummary) -> dict[str, int]:
    counts = {"solved": 0, "flaky": 0, "failed": 0, "unmeasured": 0}
    for keys in summary.verdicts.values():
        for verdict in keys.values():
            counts[verdict] = counts.get(verdict, 0) + 1
    return counts
