"""One task's state within a run: its trials, score columns and per-key tallies.

A task's state changes only through the events that name it, and it is small and
self-contained, so a store can write one task's change without rewriting the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from events.models import ScoreEmitted
from projections.columns import METRIC_FAILED, NON_SEMANTIC, OK, TRIAL_FAILED, MetricColumns, classify
from projections.declarations import Declarations, Key
from projections.passk import Tally, passes

Change = tuple[Key, Tally | None, Tally | None]
"""A key's tally before and after an event (None: the task does not have the key)."""

_STATUS = {"completed": OK, "partial": OK}


@dataclass(slots=True)
class TaskState:
    task_id: str
    first_score: int = -1
    """The run sequence number of the task's first score (orders undeclared tasks); -1: none yet."""
    touched: bool = False
    """Some trial or score event named this task (a declared untouched task is pending)."""
    trial_ids: list[str] = field(default_factory=list)
    trial_index: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, MetricColumns] = field(default_factory=dict)
    tallies: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    """metric_type -> output -> [n, c] for every key the task has."""
    failed_trials: list[tuple[int, str, str]] = field(default_factory=list)
    """(run sequence number, error type, trial_id) of failed trial.finished events."""

    def record_score(self, event: ScoreEmitted, seq: int, declarations: Declarations | None) -> list[Change]:
        """Append one score; returns the tallies it changed."""
        if self.first_score < 0:
            self.first_score = seq
        trial = self.trial_index.get(event.trial_id)
        if trial is None:
            trial = self.trial_index[event.trial_id] = len(self.trial_ids)
            self.trial_ids.append(event.trial_id)
        metric = event.metric_type
        columns = self.metrics.get(metric)
        if columns is None:
            columns = self.metrics[metric] = MetricColumns()
        if event.status == "failed":
            status = TRIAL_FAILED if event.failure == "trial" else METRIC_FAILED
        else:
            status = _STATUS[event.status]
        row = columns.append(trial, status, seq)
        kept = self.tallies.get(metric, {})
        changes: list[Change] = []
        if status == TRIAL_FAILED:
            for output, tally in kept.items():
                changes.append(((metric, output), (tally[0], tally[1]), (tally[0] + 1, tally[1])))
                tally[0] += 1
        elif status == OK:
            for out in event.outputs:
                kind, value = classify(out.value)
                columns.put(row, out.name, kind, value)
                if kind == NON_SEMANTIC:
                    continue
                key = (metric, out.name)
                counts = kept.get(out.name)
                if counts is not None:
                    changes.append((key, (counts[0], counts[1]), (counts[0] + 1, counts[1] + passes(value))))
                    counts[0] += 1
                    counts[1] += passes(value)
                elif declarations is None or declarations.keeps(self.task_id, key) is None:
                    self._keep(key)  # rule 2: an undeclared output with a semantic value
                    changes.append((key, None, self.tally(key)))
        return changes

    def tally(self, key: Key) -> Tally | None:
        counts = self.tallies.get(key[0], {}).get(key[1])
        return None if counts is None else (counts[0], counts[1])

    def tallies_flat(self) -> list[tuple[int, int]]:
        return [(n, c) for outputs in self.tallies.values() for n, c in outputs.values()]

    def kept_keys(self) -> list[Key]:
        return [(metric, output) for metric, outputs in self.tallies.items() for output in outputs]

    def rekey(self, declarations: Declarations | None) -> None:
        """Decide the task's keys afresh (SEMANTICS.md section 1 rules) from its columns."""
        self.tallies = {}
        declared = declarations.tasks.get(self.task_id) if declarations else None
        for key in declared.attempt_keys() if declared else ():
            self._keep(key)
        for metric, columns in self.metrics.items():
            for output, column in columns.outputs.items():
                key = (metric, output)
                undeclared = declarations is None or declarations.keeps(self.task_id, key) is None
                if undeclared and any(kind != NON_SEMANTIC for kind in column.kinds):
                    self._keep(key)

    def _keep(self, key: Key) -> None:
        metric, output = key
        n = c = 0
        columns = self.metrics.get(metric)
        for _, value in columns.attempts(output) if columns else ():
            n += 1
            c += passes(value)
        self.tallies.setdefault(metric, {})[output] = [n, c]
