"""A task's scores of one metric, stored as compact columns in log order.

One row per applied `score.emitted` of that (task, metric_type): the trial (an index
into the task's trial ids), the status and the run sequence number (metric aggregates
take values in run log order, across tasks). Outputs are sparse columns beside them:
only the rows that carry the output have a cell (the row, the value's kind, its semantic
value). Everything the summary needs is derived from these columns.

Rows and cells are packed, 13 bytes each, in one `bytearray` per metric and one per output:
a task has a handful of rows, and an array object per field (six per metric) cost more in
headers and growth than its data (~360 bytes a metric of 8 rows). The fields are read back
with `struct.iter_unpack`, in C, over a copy (`_frozen`); `unpacked` gives a column's three
fields as the arrays the store writes and `of` takes back.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from projections.sharing import shared

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

ROW = struct.Struct("=iBq")
"""A score's row: trial index (int32), status (uint8), run sequence number (int64)."""
CELL = struct.Struct("=iBd")
"""An output's cell: row (int32), value kind (uint8), semantic value (double)."""
STATUS_AT = 4
"""The status's byte within a row."""
KIND_AT = 4
"""The kind's byte within a cell."""


def classify(value: object) -> tuple[int, float]:
    """(value kind, semantic value) of an output value as decoded from the wire."""
    kind = type(value)
    if kind is bool:
        return BOOLEAN, 1.0 if value else 0.0
    if kind is float or kind is int:
        return NUMERIC, float(value)  # type: ignore[arg-type]
    return NON_SEMANTIC, 0.0


def _frozen(packed: bytearray) -> bytes:
    """A copy to iterate: an iterator over the bytearray itself holds a buffer export, and
    while one lives (a generator left suspended, a traceback's frames) the column cannot
    grow or be truncated (BufferError)."""
    return bytes(packed)


def _unpacked(packed: bytearray, layout: struct.Struct, first: str, third: str) -> tuple[array[Any], bytes, array[Any]]:
    """The three fields of `layout` (the middle one a byte), as arrays of typecodes
    `first` and `third` and bytes."""
    if not packed:
        return array(first), b"", array(third)
    firsts, middles, thirds = zip(*layout.iter_unpack(_frozen(packed)), strict=True)
    return array(first, firsts), bytes(middles), array(third, thirds)


def _packed(layout: struct.Struct, *columns: object) -> bytearray:
    return bytearray(b"".join(layout.pack(*fields) for fields in zip(*columns, strict=True)))


@dataclass(slots=True)
class OutputColumn:
    """One output's cells, as a metric's `outputs` hands them out (the same bytearray)."""

    cells: bytearray = field(default_factory=bytearray)
    """One packed `CELL` per row that carries the output, rows ascending."""

    @classmethod
    def of(cls, rows: array[int], kinds: bytes, values: array[float]) -> OutputColumn:
        return cls(_packed(CELL, rows, kinds, values))

    def __len__(self) -> int:
        return len(self.cells) // CELL.size

    def unpacked(self) -> tuple[array[int], bytes, array[float]]:
        """(rows, kinds, values)."""
        return _unpacked(self.cells, CELL, "i", "d")

    def semantic(self) -> bool:
        """Whether some cell has a semantic value."""
        return self.cells[KIND_AT :: CELL.size].count(NON_SEMANTIC) != len(self)

    def semantic_at(self) -> dict[int, float]:
        """Row -> semantic value, for the rows where the output has one."""
        return {row: value for row, kind, value in CELL.iter_unpack(_frozen(self.cells)) if kind != NON_SEMANTIC}


@dataclass(slots=True)
class MetricColumns:
    packed: bytearray = field(default_factory=bytearray)
    """One packed `ROW` per score, in log order."""
    names: tuple[str, ...] = ()
    """The output names, in the order the scores brought them: one tuple shared by the
    metrics whose names are alike (a dict of outputs per metric cost ~180 bytes)."""
    cells: list[bytearray] = field(default_factory=list)
    """The cells of each output of `names`."""

    @classmethod
    def of(
        cls, trials: array[int], statuses: bytes, seqs: array[int], outputs: dict[str, OutputColumn]
    ) -> MetricColumns:
        return cls(
            _packed(ROW, trials, statuses, seqs),
            shared(tuple(sys.intern(name) for name in outputs)),
            [column.cells for column in outputs.values()],
        )

    def __len__(self) -> int:
        return len(self.packed) // ROW.size

    @property
    def outputs(self) -> dict[str, OutputColumn]:
        """Output name -> its column, in the order of `names`."""
        return {name: OutputColumn(cells) for name, cells in zip(self.names, self.cells, strict=True)}

    def column(self, output: str) -> OutputColumn | None:
        """The column of `output`, if some row carries it."""
        names = self.names
        return OutputColumn(self.cells[names.index(output)]) if output in names else None

    def carried(self) -> dict[str, int]:
        """Output name -> the rows that carry it."""
        return {name: len(cells) // CELL.size for name, cells in zip(self.names, self.cells, strict=True)}

    def unpacked(self) -> tuple[array[int], bytes, array[int]]:
        """(trials, statuses, seqs)."""
        return _unpacked(self.packed, ROW, "i", "q")

    def add_output(self, name: str) -> bytearray:
        """The cells of a new output `name` (empty)."""
        cells = bytearray()
        # One statement: a step that fails part way leaves the two of the same length.
        self.names, self.cells = shared((*self.names, sys.intern(name))), [*self.cells, cells]
        return cells

    def truncate(self, rows: int) -> None:
        """Keep the first `rows` rows, and the outputs and cells they had."""
        del self.packed[rows * ROW.size :]
        names, cells = [], []
        for name, column in zip(self.names, self.cells, strict=True):
            # An output's rows ascend: those before `rows` are the ones it had.
            kept = bisect_left(OutputColumn(column).unpacked()[0], rows)
            if kept:  # else made by a row dropped now
                del column[kept * CELL.size :]
                names.append(name)
                cells.append(column)
        self.names = shared(tuple(names))
        self.cells = cells

    def append(self, trial: int, status: int, seq: int) -> int:
        """Add a row; returns its index."""
        row = len(self)
        self.packed += ROW.pack(trial, status, seq)
        return row

    def attempts(self, output: str) -> Iterator[tuple[int, float | None, int]]:
        """(trial index, value, run sequence number of the score) of the attempts of key
        (this metric, `output`), in log order.

        SEMANTICS.md section 1: a dead trial adds null, a metric failure adds nothing, a
        completed or partial score adds the output's semantic value if it has one.
        """
        column = self.column(output)
        semantic = column.semantic_at() if column is not None else {}
        for row, (trial, status, seq) in enumerate(ROW.iter_unpack(_frozen(self.packed))):
            if status == TRIAL_FAILED:
                yield trial, None, seq
            elif status == OK and row in semantic:
                yield trial, semantic[row], seq

    def numeric(self, output: str) -> list[tuple[int, float]]:
        """(run sequence number, value) of the output's numeric values, in log order."""
        column = self.column(output)
        if column is None:
            return []
        packed, at = self.packed, ROW.size
        return [
            (ROW.unpack_from(packed, row * at)[2], value)
            for row, kind, value in CELL.iter_unpack(_frozen(column.cells))
            if kind == NUMERIC
        ]

    def failed(self) -> int:
        return len(self) - self.packed[STATUS_AT :: ROW.size].count(OK)

    def latest_ok_rows(self) -> dict[int, int]:
        """Trial index -> its last completed/partial row (a later score wins)."""
        return {
            trial: row for row, (trial, status, _) in enumerate(ROW.iter_unpack(_frozen(self.packed))) if status == OK
        }
