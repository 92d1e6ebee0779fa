"""A task's scores of one metric, stored as one packed record per score, in log order.

One record per applied `score.emitted` of that (task, metric_type): the trial (an index
into the task's trial ids), the status and the run sequence number (metric aggregates
take values in run log order, across tasks), then one slot per output name the metric's
scores have brought: the value's kind and its semantic value, or `ABSENT` where the score
did not carry that output. Everything the summary needs is derived from these records.

The records are packed in one `bytearray` per metric: a task has a handful of scores, and
an object per field or per output (an array or a bytearray, a list of them) cost more in
headers and growth than its data. A metric's scores nearly always carry the same outputs,
so a record is 22 bytes for one output and no slot is wasted; a new output name widens
the records once. Fields are read back with `struct.iter_unpack`, in C, over a copy
(`_frozen`), through a layout that skips what the reader does not need.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
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
ABSENT = 255
"""The slot of an output the score did not carry."""

ROW = struct.Struct("=iBq")
"""A record's head: trial index (int32), status (uint8), run sequence number (int64)."""
SLOT = struct.Struct("=Bd")
"""An output's slot in a record: value kind (uint8), semantic value (double)."""
STATUS_AT = 4
"""The status's byte within a record."""

Slots = Sequence[tuple[int, float]]
"""(kind, value) of each output of a metric's names, for one record."""
Stored = tuple["array[Any]", bytes, "array[Any]"]
"""Three fields of some rows, as arrays and bytes."""


@lru_cache(maxsize=64)
def record_layout(width: int) -> struct.Struct:
    """A whole record of a metric with `width` output names."""
    return struct.Struct("=iBq" + "Bd" * width)


@lru_cache(maxsize=64)
def _heads(width: int) -> struct.Struct:
    """A record's head, its slots skipped."""
    return struct.Struct(f"=iBq{SLOT.size * width}x" if width else "=iBq")


@lru_cache(maxsize=256)
def _with_slot(width: int, at: int) -> struct.Struct:
    """A record's head and its slot number `at`, the other slots skipped."""
    before, after = SLOT.size * at, SLOT.size * (width - at - 1)
    return struct.Struct("=iBq" + (f"{before}x" if before else "") + "Bd" + (f"{after}x" if after else ""))


def _kind_at(at: int) -> int:
    """The byte of slot `at`'s kind within a record."""
    return ROW.size + SLOT.size * at


def record_size(width: int) -> int:
    """`record_layout(width).size`, without the cache lookup (rows are counted often)."""
    return ROW.size + SLOT.size * width


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
    while one lives (a generator left suspended, a traceback's frames) the records cannot
    grow or be truncated (BufferError)."""
    return bytes(packed)


@dataclass(frozen=True, slots=True)
class OutputColumn:
    """One output of a metric, read from its records (a view: taken again after a change)."""

    packed: bytes
    width: int
    at: int
    """The output's slot among the metric's `width`."""

    def __len__(self) -> int:
        """The rows that carry the output."""
        kinds = self.packed[_kind_at(self.at) :: record_size(self.width)]
        return len(kinds) - kinds.count(ABSENT)

    def cells(self) -> Iterator[tuple[int, int, float]]:
        """(row, kind, value) of each row that carries the output, rows ascending."""
        for row, (_, _, _, kind, value) in enumerate(_with_slot(self.width, self.at).iter_unpack(self.packed)):
            if kind != ABSENT:
                yield row, kind, value

    def semantic(self) -> bool:
        """Whether some row carries a semantic value of it."""
        kinds = self.packed[_kind_at(self.at) :: record_size(self.width)]
        return len(kinds) != kinds.count(ABSENT) + kinds.count(NON_SEMANTIC)

    def semantic_at(self) -> dict[int, float]:
        """Row -> semantic value, for the rows where the output has one."""
        return {row: value for row, kind, value in self.cells() if kind != NON_SEMANTIC}


@dataclass(slots=True)
class MetricColumns:
    packed: bytearray = field(default_factory=bytearray)
    """One packed record (`record_layout(len(names))`) per score, in log order."""
    names: tuple[str, ...] = ()
    """The output names, in the order the scores brought them: one tuple shared by the
    metrics whose names are alike (a dict of outputs per metric cost ~180 bytes)."""

    @classmethod
    def of(
        cls,
        trials: array[int],
        statuses: bytes,
        seqs: array[int],
        outputs: dict[str, Stored],
    ) -> MetricColumns:
        """The records of the given rows, and of each output's (rows, kinds, values)."""
        width = len(outputs)
        slots: list[list[Any]] = [[ABSENT, 0.0] * width for _ in trials]
        for at, (rows, kinds, values) in enumerate(outputs.values()):
            for row, kind, value in zip(rows, kinds, values, strict=True):
                slots[row][2 * at : 2 * at + 2] = kind, value
        layout = record_layout(width)
        packed = b"".join(layout.pack(*head, *rest) for *head, rest in zip(trials, statuses, seqs, slots, strict=True))
        return cls(bytearray(packed), shared(tuple(sys.intern(name) for name in outputs)))

    def __len__(self) -> int:
        return len(self.packed) // record_size(len(self.names))

    @property
    def outputs(self) -> dict[str, OutputColumn]:
        """Output name -> its column, in the order of `names`."""
        packed, width = _frozen(self.packed), len(self.names)
        return {name: OutputColumn(packed, width, at) for at, name in enumerate(self.names)}

    def column(self, output: str) -> OutputColumn | None:
        """The column of `output`, if some row carries it."""
        names = self.names
        return OutputColumn(_frozen(self.packed), len(names), names.index(output)) if output in names else None

    def carried(self) -> dict[str, int]:
        """Output name -> the rows that carry it."""
        packed, size = self.packed, record_size(len(self.names))
        rows = len(packed) // size
        return {name: rows - packed[_kind_at(at) :: size].count(ABSENT) for at, name in enumerate(self.names)}

    def seqs(self) -> list[int]:
        """The run sequence number of each row."""
        return [seq for _, _, seq in _heads(len(self.names)).iter_unpack(_frozen(self.packed))]

    def stored(self) -> tuple[Stored, dict[str, Stored]]:
        """(trials, statuses, seqs) of the rows, and (rows, kinds, values) of each output's
        rows that carry it: the arrays the store writes (`of` takes them back), in one pass."""
        if not self.packed:
            return (array("i"), b"", array("q")), {}
        fields = list(zip(*record_layout(len(self.names)).iter_unpack(_frozen(self.packed)), strict=True))
        outputs = {}
        for at, name in enumerate(self.names):
            kinds, values = fields[3 + 2 * at], fields[4 + 2 * at]
            rows = [row for row, kind in enumerate(kinds) if kind != ABSENT]
            outputs[name] = (
                array("i", rows),
                bytes(kinds[row] for row in rows),
                array("d", [values[row] for row in rows]),
            )
        return (array("i", fields[0]), bytes(fields[1]), array("q", fields[2])), outputs

    def slot_of(self, name: str) -> int:
        """The slot of output `name`, a new one (every record widened) if no score has
        brought it yet."""
        names = self.names
        if name in names:
            return names.index(name)
        width = len(names)
        absent = SLOT.pack(ABSENT, 0.0)
        size = record_size(width)
        packed = self.packed
        widened = bytearray(b"".join(packed[start : start + size] + absent for start in range(0, len(packed), size)))
        # One statement: a step that fails part way leaves records and names agreeing.
        self.packed, self.names = widened, shared((*names, sys.intern(name)))
        return width

    def truncate(self, rows: int) -> None:
        """Keep the first `rows` rows, and the outputs they carried."""
        width = len(self.names)
        layout = record_layout(width)
        del self.packed[rows * layout.size :]
        carried = self.carried()
        if all(carried.values()):
            return
        kept = [at for at, name in enumerate(self.names) if carried[name]]
        narrowed = record_layout(len(kept))
        packed = b"".join(
            narrowed.pack(*record[:3], *(field for at in kept for field in record[3 + 2 * at : 5 + 2 * at]))
            for record in layout.iter_unpack(_frozen(self.packed))
        )
        self.packed, self.names = bytearray(packed), shared(tuple(self.names[at] for at in kept))

    def append(self, trial: int, status: int, seq: int, slots: Slots = ()) -> int:
        """Add a record (`slots`: one (kind, value) per name; none: every output absent);
        returns its row."""
        width = len(self.names)
        row = len(self)
        fields = [field for slot in slots for field in slot] if slots else [ABSENT, 0.0] * width
        self.packed += record_layout(width).pack(trial, status, seq, *fields)
        return row

    def attempts(self, output: str) -> Iterator[tuple[int, float | None, int]]:
        """(trial index, value, run sequence number of the score) of the attempts of key
        (this metric, `output`), in log order.

        SEMANTICS.md section 1: a dead trial adds null, a metric failure adds nothing, a
        completed or partial score adds the output's semantic value if it has one.
        """
        names = self.names
        if output not in names:
            for trial, status, seq in _heads(len(names)).iter_unpack(_frozen(self.packed)):
                if status == TRIAL_FAILED:
                    yield trial, None, seq
            return
        for trial, status, seq, kind, value in _with_slot(len(names), names.index(output)).iter_unpack(
            _frozen(self.packed)
        ):
            if status == TRIAL_FAILED:
                yield trial, None, seq
            elif status == OK and kind not in (ABSENT, NON_SEMANTIC):
                yield trial, value, seq

    def numeric(self, output: str) -> list[tuple[int, float]]:
        """(run sequence number, value) of the output's numeric values, in log order."""
        names = self.names
        if output not in names:
            return []
        layout = _with_slot(len(names), names.index(output))
        return [(seq, value) for _, _, seq, kind, value in layout.iter_unpack(_frozen(self.packed)) if kind == NUMERIC]

    def failed(self) -> int:
        return len(self) - self.packed[STATUS_AT :: record_size(len(self.names))].count(OK)

    def latest_ok_rows(self) -> dict[int, int]:
        """Trial index -> its last completed/partial row (a later score wins)."""
        heads = _heads(len(self.names)).iter_unpack(_frozen(self.packed))
        return {trial: row for row, (trial, status, _) in enumerate(heads) if status == OK}
