"""A task's scores of one metric, stored as compact columns in log order.

One row per applied `score.emitted` of that (task, metric_type): the trial (an index
into the task's trial ids), the status and the run sequence number (metric aggregates
take values in run log order, across tasks). Outputs are sparse columns beside them:
only the rows that carry the output have an entry. About 5 bytes a row plus 13 bytes
an output, against hundreds for the decoded event; everything the summary needs is
derived from these columns.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

OK = 0
"""completed or partial: the outputs count."""
TRIAL_FAILED = 1
"""failed, failure "trial": the trial died; an attempt with value null."""
METRIC_FAILED = 2
"""failed, failure "metric": unmeasured, adds no attempt."""

NON_SEMANTIC = 0
"""null or a label: carried (coverage) but no semantic value."""
BOOLEAN = 1
"""semantic value 1.0 / 0.0, but not numeric (metric aggregates skip it)."""
NUMERIC = 2


def classify(value: object) -> tuple[int, float]:
    """(value kind, semantic value) of an output value as decoded from the wire."""
    kind = type(value)
    if kind is bool:
        return BOOLEAN, 1.0 if value else 0.0
    if kind is float or kind is int:
        return NUMERIC, float(value)  # type: ignore[arg-type]
    return NON_SEMANTIC, 0.0


@dataclass(slots=True)
class OutputColumn:
    rows: array[int] = field(default_factory=lambda: array("i"))
    kinds: bytearray = field(default_factory=bytearray)
    values: array[float] = field(default_factory=lambda: array("d"))

    def semantic_at(self) -> dict[int, float]:
        """Row -> semantic value, for the rows where the output has one."""
        return {
            row: value
            for row, kind, value in zip(self.rows, self.kinds, self.values, strict=True)
            if kind != NON_SEMANTIC
        }


@dataclass(slots=True)
class MetricColumns:
    trials: array[int] = field(default_factory=lambda: array("i"))
    statuses: bytearray = field(default_factory=bytearray)
    seqs: array[int] = field(default_factory=lambda: array("q"))
    outputs: dict[str, OutputColumn] = field(default_factory=dict)

    def append(self, trial: int, status: int, seq: int) -> int:
        """Add a row; returns its index."""
        self.trials.append(trial)
        self.statuses.append(status)
        self.seqs.append(seq)
        return len(self.statuses) - 1

    def attempts(self, output: str) -> Iterator[tuple[int, float | None, int]]:
        """(trial index, value, run sequence number of the score) of the attempts of key
        (this metric, `output`), in log order.

        SEMANTICS.md section 1: a dead trial adds null, a metric failure adds nothing, a
        completed or partial score adds the output's semantic value if it has one.
        """
        semantic = self.outputs[output].semantic_at() if output in self.outputs else {}
        for row, (trial, status, seq) in enumerate(zip(self.trials, self.statuses, self.seqs, strict=True)):
            if status == TRIAL_FAILED:
                yield trial, None, seq
            elif status == OK and row in semantic:
                yield trial, semantic[row], seq

    def numeric(self, output: str) -> list[tuple[int, float]]:
        """(run sequence number, value) of the output's numeric values, in log order."""
        column = self.outputs.get(output)
        if column is None:
            return []
        seqs = self.seqs
        return [
            (seqs[row], value)
            for row, kind, value in zip(column.rows, column.kinds, column.values, strict=True)
            if kind == NUMERIC
        ]

    def failed(self) -> int:
        return len(self.statuses) - self.statuses.count(OK)

    def latest_ok_rows(self) -> dict[int, int]:
        """Trial index -> its last completed/partial row (a later score wins)."""
        return {
            trial: row
            for row, (trial, status) in enumerate(zip(self.trials, self.statuses, strict=True))
            if status == OK
        }
