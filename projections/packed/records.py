"""A task's scores of one metric, stored as one packed record per score, in log order.

One record per applied `score.emitted` of that (task, metric_type): the trial (an index
into the task's trial ids), the status and the run sequence number (metric aggregates
take values in run log order, across tasks), then one slot for each output name the
metric's scores have brought (the first `DENSE` of them): the value's kind and its semantic
value, or `ABSENT` where the score did not carry that output. Everything the summary needs
is derived from these records.

The records are packed in one `bytes` object per metric: a task has a handful of scores, and
an object per field or per output (an array or a bytearray, a list of them) cost more in
headers and growth than its data. A metric's scores nearly always carry the same outputs,
so a record is 22 bytes for one output and no slot is wasted; a new output name widens
the records once. The bytes are immutable: a score makes them anew (O(rows of the metric),
as finding its trial among the task's is O(trials)), where a `bytearray` was two blocks, its
object and its buffer (~32 bytes more a metric), and had to be copied to be read safely.
Fields are read back with `struct.iter_unpack`, in C, through a layout that skips what the
reader does not need.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, final

from projections.packed.sharing import shared

OK: Final = 0
"""completed or partial: the outputs count."""
TRIAL_FAILED: Final = 1
"""failed, failure "trial": the trial died; an attempt with value null."""
METRIC_FAILED: Final = 2
"""failed, failure "metric": unmeasured, adds no attempt."""

NON_SEMANTIC: Final = 0
"""null or a label: carried (coverage) but no semantic value."""
BOOLEAN: Final = 1
"""semantic value 1.0 / 0.0, but not numeric (metric aggregates skip it)."""
NUMERIC: Final = 2
ABSENT: Final = 255
"""The slot of an output the score did not carry."""

ROW: Final = struct.Struct("=iBq")
"""A record's head: trial index (int32), status (uint8), run sequence number (int64)."""
SLOT: Final = struct.Struct("=Bd")
"""An output's slot in a record: value kind (uint8), semantic value (double)."""
DENSE: Final = 8
"""The output names of a metric that have a slot in its records. A metric's scores nearly
always carry the same few; a harness that gives each score a new name would otherwise make
every record as wide as all the names (O(rows x names) bytes, and a widening each): the
names past these keep their cells apart (`SPILLED`), so a record never grows past them."""
SPILLED: Final = struct.Struct("=iIBd")
"""A cell of a name past the first `DENSE`: row (int32), the name's index (uint32), value
kind (uint8), semantic value (double)."""

Stored = tuple["array[Any]", bytes, "array[Any]"]
"""Three fields of some rows, as arrays and bytes."""


@lru_cache(maxsize=64)
def record_layout(width: int) -> struct.Struct:
    """A whole record with `width` slots."""
    return struct.Struct("=iBq" + "Bd" * width)


@lru_cache(maxsize=256)
def _with_slot(width: int, at: int) -> struct.Struct:
    """A record's head and its slot number `at`, the other slots skipped."""
    before, after = SLOT.size * at, SLOT.size * (width - at - 1)
    return struct.Struct("=iBq" + (f"{before}x" if before else "") + "Bd" + (f"{after}x" if after else ""))


@lru_cache(maxsize=64)
def _little(width: int) -> struct.Struct:
    """`record_layout(width)` in little-endian order, the stored one."""
    return struct.Struct("<iBq" + "Bd" * width)


_LITTLE_SPILLED: Final = struct.Struct("<iIBd")


def reordered(data: bytes, source: struct.Struct, target: struct.Struct) -> bytes:
    """Records of layout `source` written with layout `target` (the same fields in another
    byte order)."""
    return b"".join(target.pack(*fields) for fields in source.iter_unpack(data))


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


@final
class OutputColumn:
    """One output of a metric: the rows that carry it (a view: taken again after a change).
    A plain class, made natively by the compiled fold: a frozen dataclass sets its field
    through `object.__setattr__`, and one is made per view signal of a task's summary share."""

    __slots__ = ("cells",)

    def __init__(self, cells: list[tuple[int, int, float]]) -> None:
        self.cells: Final = cells
        """(row, kind, value) of each row that carries the output, rows ascending."""

    def __len__(self) -> int:
        return len(self.cells)

    def semantic(self) -> bool:
        """Whether some row carries a semantic value of it."""
        return any(kind != NON_SEMANTIC for _, kind, _ in self.cells)


@dataclass(slots=True, init=False)
class MetricColumns:
    # Its __init__ is written out: a dataclass's generated one runs as Python even in the
    # compiled fold (mypyc compiles the methods of the class body only).
    packed: bytes
    """One packed record (`record_layout(width)`) per score, in log order."""
    names: tuple[str, ...]
    """The output names, in the order the scores brought them: one tuple shared by the
    metrics whose names are alike (a dict of outputs per metric cost ~180 bytes)."""
    spilled: bytes | None
    """The cells (`SPILLED`: row, name's index, kind, value), rows ascending, of the names
    past the first `DENSE`, which have no slot in the records (None: no such name)."""

    def __init__(self, packed: bytes = b"", names: tuple[str, ...] = (), spilled: bytes | None = None) -> None:
        self.packed = packed
        self.names = names
        self.spilled = spilled

    @property
    def width(self) -> int:
        """The slots of a record: one per name, up to `DENSE`."""
        return min(len(self.names), DENSE)

    @classmethod
    def of(cls, trials: array[int], statuses: bytes, seqs: array[int], outputs: dict[str, Stored]) -> MetricColumns:
        """The records of the given rows, and of each output's (rows, kinds, values)."""
        width = min(len(outputs), DENSE)
        slots: list[list[Any]] = [[ABSENT, 0.0] * width for _ in trials]
        spilled: list[tuple[int, int, int, float]] = []
        for at, (rows, kinds, values) in enumerate(outputs.values()):
            for row, kind, value in zip(rows, kinds, values, strict=True):
                if at < DENSE:
                    slots[row][2 * at : 2 * at + 2] = kind, value
                else:
                    spilled.append((row, at, kind, value))
        layout = record_layout(width)
        packed = b"".join(layout.pack(*head, *rest) for *head, rest in zip(trials, statuses, seqs, slots, strict=True))
        names = shared(tuple(sys.intern(name) for name in outputs))
        return cls(packed, names, _spilled(sorted(spilled)) if len(names) > DENSE else None)

    def __len__(self) -> int:
        return len(self.packed) // record_size(self.width)

    def cells(self, at: int) -> list[tuple[int, int, float]]:
        """(row, kind, value) of the rows that carry output number `at`, rows ascending."""
        if at < DENSE:
            layout = _with_slot(self.width, at)
            return [
                (row, kind, value)
                for row, (_, _, _, kind, value) in enumerate(layout.iter_unpack(self.packed))
                if kind != ABSENT
            ]
        return [(row, kind, value) for row, name, kind, value in _spilled_cells(self.spilled) if name == at]

    @property
    def outputs(self) -> dict[str, OutputColumn]:
        """Output name -> its column, in the order of `names`."""
        return {name: OutputColumn(self.cells(at)) for at, name in enumerate(self.names)}

    def stored(self) -> tuple[Stored, dict[str, Stored]]:
        """(trials, statuses, seqs) of the rows, and (rows, kinds, values) of each output's
        rows that carry it: the arrays the store writes (`of` takes them back)."""
        if not self.packed:
            return (array("i"), b"", array("q")), {}
        fields = list(zip(*record_layout(self.width).iter_unpack(self.packed), strict=True))
        outputs = {}
        for at, name in enumerate(self.names):
            if at < DENSE:
                kinds, values = fields[3 + 2 * at], fields[4 + 2 * at]
                cells = [(row, kind, values[row]) for row, kind in enumerate(kinds) if kind != ABSENT]
            else:
                cells = self.cells(at)
            rows, carried_kinds, carried_values = zip(*cells, strict=True) if cells else ((), (), ())
            outputs[name] = (array("i", rows), bytes(carried_kinds), array("d", carried_values))
        return (array("i", fields[0]), bytes(fields[1]), array("q", fields[2])), outputs

    def records_bytes(self) -> tuple[bytes, bytes | None]:
        """The records, and the spilled cells (None: none), as bytes in little-endian order:
        what the store writes (`of_bytes` takes them back), one copy each on a little-endian
        machine where the fields are each a column to gather."""
        records, spilled = self.packed, self.spilled
        if sys.byteorder == "big":
            records = reordered(records, record_layout(self.width), _little(self.width))
            spilled = None if spilled is None else reordered(spilled, SPILLED, _LITTLE_SPILLED)
        return records, spilled

    @classmethod
    def of_bytes(cls, names: tuple[str, ...], records: bytes, spilled: bytes | None) -> MetricColumns:
        """The columns `records_bytes` gave, with their output `names`; ValueError if the
        bytes cannot be such records."""
        width = min(len(names), DENSE)
        if len(records) % record_size(width):
            raise ValueError(f"{len(records)} bytes are not records of {width} slots")
        if (spilled is not None) != (len(names) > DENSE):
            raise ValueError(f"spilled cells are {'absent' if spilled is None else 'there'} for {len(names)} names")
        if spilled is not None and len(spilled) % SPILLED.size:
            raise ValueError(f"{len(spilled)} bytes are not spilled cells")
        if sys.byteorder == "big":
            records = reordered(records, _little(width), record_layout(width))
            spilled = None if spilled is None else reordered(spilled, _LITTLE_SPILLED, SPILLED)
        interned = shared(tuple(sys.intern(name) for name in names))
        return cls(records, interned, spilled)

    def slot_of(self, name: str) -> int:
        """The index of output `name` among `names`, a new one if no score has brought it
        yet (every record widened by a slot while there are fewer than `DENSE`)."""
        names = self.names
        if name in names:
            return names.index(name)
        at = len(names)
        named = shared((*names, sys.intern(name)))
        if at >= DENSE:
            self.names, self.spilled = named, self.spilled if self.spilled is not None else b""
            return at
        absent = SLOT.pack(ABSENT, 0.0)
        size = record_size(at)
        packed = self.packed
        widened = b"".join(packed[start : start + size] + absent for start in range(0, len(packed), size))
        # One statement: a step that fails part way leaves records and names agreeing.
        self.packed, self.names = widened, named
        return at

    def append(self, trial: int, status: int, seq: int, cells: Mapping[int, tuple[int, float]] | None = None) -> int:
        """Add a record; `cells`: (kind, value) of the outputs it carries, by their index
        among `names` (none: a failed score). Returns its row."""
        width = self.width
        row = len(self)
        fields: list[Any] = [ABSENT, 0.0] * width
        if cells:
            for at, (kind, value) in sorted(cells.items()):
                if at < DENSE:
                    fields[2 * at : 2 * at + 2] = kind, value
                else:
                    assert self.spilled is not None  # `slot_of` made it
                    self.spilled += SPILLED.pack(row, at, kind, value)
        self.packed += record_layout(width).pack(trial, status, seq, *fields)
        return row

    def read(self) -> MetricRecords:
        """The records unpacked, for what is derived from them."""
        return MetricRecords(self)


@final
class MetricRecords:
    """A metric's records unpacked once: (trial, status, seq, then kind and value of each
    slot) per row. Everything the summary takes from a metric is read from these, so that
    a reader asking several things (a task's share of its summary: attempts, numeric
    values, latest rows, view signals) turns each field into a Python object once, not
    once per question. A view: read again after a change."""

    __slots__ = ("columns", "latest", "rows")

    def __init__(self, columns: MetricColumns) -> None:
        self.columns: Final = columns
        self.rows: Final[list[tuple[Any, ...]]] = list(record_layout(columns.width).iter_unpack(columns.packed))
        self.latest: dict[int, int] | None = None

    def _slot(self, output: str) -> int:
        """The output's index among the names (-1: no score carried it)."""
        names = self.columns.names
        return names.index(output) if output in names else -1

    def attempts(self, output: str) -> list[tuple[int, float | None, int]]:
        """(trial index, value, run sequence number of the score) of the attempts of key
        (this metric, `output`), in log order.

        SEMANTICS.md section 1: a dead trial adds null, a metric failure adds nothing, a
        completed or partial score adds the output's semantic value if it has one.
        """
        at = self._slot(output)
        if 0 <= at < DENSE:
            kind_at = 3 + 2 * at
            return [
                (row[0], None if row[1] == TRIAL_FAILED else row[kind_at + 1], row[2])
                for row in self.rows
                if row[1] == TRIAL_FAILED or (row[1] == OK and row[kind_at] != ABSENT and row[kind_at] != NON_SEMANTIC)
            ]
        semantic = self.semantic_at(output)
        return [
            (row[0], None if row[1] == TRIAL_FAILED else semantic[index], row[2])
            for index, row in enumerate(self.rows)
            if row[1] == TRIAL_FAILED or (row[1] == OK and index in semantic)
        ]

    def numeric(self, output: str) -> list[tuple[int, float]]:
        """(run sequence number, value) of the output's numeric values, in log order."""
        at = self._slot(output)
        if at < 0:
            return []
        if at < DENSE:
            kind_at = 3 + 2 * at
            return [(row[2], row[kind_at + 1]) for row in self.rows if row[kind_at] == NUMERIC]
        rows = self.rows
        return [(rows[index][2], value) for index, kind, value in self.columns.cells(at) if kind == NUMERIC]

    def semantic_at(self, output: str) -> dict[int, float]:
        """Row -> the output's semantic value, for the rows where it has one."""
        at = self._slot(output)
        if at < 0:
            return {}
        if at < DENSE:
            kind_at = 3 + 2 * at
            return {
                index: row[kind_at + 1]
                for index, row in enumerate(self.rows)
                if row[kind_at] != ABSENT and row[kind_at] != NON_SEMANTIC
            }
        return {index: value for index, kind, value in self.columns.cells(at) if kind != NON_SEMANTIC}

    def failed(self) -> int:
        """The rows that are not a completed or partial score."""
        return sum(1 for row in self.rows if row[1] != OK)

    def carried(self) -> dict[str, int]:
        """Output name -> the rows that carry it."""
        rows, columns = self.rows, self.columns
        names = columns.names
        carried = {name: sum(1 for row in rows if row[3 + 2 * at] != ABSENT) for at, name in enumerate(names[:DENSE])}
        if columns.spilled is not None:
            carried.update(dict.fromkeys(names[DENSE:], 0))
            for _, name, _, _ in _spilled_cells(columns.spilled):
                carried[names[name]] += 1
        return carried

    def latest_ok_rows(self) -> dict[int, int]:
        """Trial index -> its last completed/partial row (a later score wins)."""
        if self.latest is None:
            self.latest = {row[0]: index for index, row in enumerate(self.rows) if row[1] == OK}
        return self.latest


def _spilled(cells: list[tuple[int, int, int, float]]) -> bytes:
    return b"".join(SPILLED.pack(*cell) for cell in cells)


def _spilled_cells(spilled: bytes | None) -> Iterator[tuple[int, int, int, float]]:
    return SPILLED.iter_unpack(spilled) if spilled else iter(())
