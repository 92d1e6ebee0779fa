"""A metric's packed records against a plain model of them: rows as tuples, each score's
outputs as a dict, in the order they came. Whatever order new output names arrive in (more
of them than a record has slots for), and wherever a truncation cuts, the records give what
the model gives, bit for bit."""

from __future__ import annotations

import struct
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.packed.records import (
    BOOLEAN,
    DENSE,
    METRIC_FAILED,
    NON_SEMANTIC,
    NUMERIC,
    OK,
    SPILLED,
    TRIAL_FAILED,
    MetricColumns,
    record_layout,
    reordered,
)

Cell = tuple[int, float]
Row = tuple[int, int, int, dict[str, Cell]]

NAMES = ["score", "passed", "label", "tokens", *(f"extra-{index}" for index in range(DENSE + 2))]
"""More names than a record has slots for: the ones past them are kept apart."""
values = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0])
cells = st.tuples(st.sampled_from([NON_SEMANTIC, BOOLEAN, NUMERIC]), values)
rows = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.sampled_from([OK, OK, OK, TRIAL_FAILED, METRIC_FAILED]),
        st.dictionaries(st.sampled_from(NAMES), cells, max_size=4),
    ),
    max_size=16,
)


def bits(value: float | None) -> bytes | None:
    return None if value is None else struct.pack("<d", value)


def check(columns: MetricColumns, model: list[Row]) -> None:
    names = list(dict.fromkeys(name for _, _, _, outputs in model for name in outputs))
    assert list(columns.names) == names
    assert len(columns) == len(model)
    records = columns.read()
    assert records.failed() == sum(status != OK for _, status, _, _ in model)
    assert [seq for _, _, seq, *_ in records.rows] == [seq for _, _, seq, _ in model]
    assert records.latest_ok_rows() == {trial: row for row, (trial, status, _, _) in enumerate(model) if status == OK}
    assert records.carried() == {name: sum(name in outputs for *_, outputs in model) for name in names}
    for name in [*names, "never"]:
        expected: list[tuple[int, bytes | None, int]] = []
        for trial, status, seq, outputs in model:
            if status == TRIAL_FAILED:
                expected.append((trial, None, seq))
            elif status == OK and name in outputs and outputs[name][0] != NON_SEMANTIC:
                expected.append((trial, bits(outputs[name][1]), seq))
        assert [(trial, bits(value), seq) for trial, value, seq in records.attempts(name)] == expected
        numeric = [(seq, bits(outputs[name][1])) for *_, seq, outputs in model if outputs.get(name, (0,))[0] == NUMERIC]
        assert [(seq, bits(value)) for seq, value in records.numeric(name)] == numeric
    for name, column in columns.outputs.items():
        carrying = [(row, outputs[name]) for row, (*_, outputs) in enumerate(model) if name in outputs]
        assert len(column) == len(carrying)
        assert column.semantic() == any(kind != NON_SEMANTIC for _, (kind, _) in carrying)
        semantic = {row: bits(value) for row, (kind, value) in carrying if kind != NON_SEMANTIC}
        assert {row: bits(value) for row, value in records.semantic_at(name).items()} == semantic
    heads, stored = columns.stored()
    restored = MetricColumns.of(*heads, stored)
    assert (restored.packed, restored.names) == (columns.packed, columns.names)
    again = MetricColumns.of_bytes(columns.names, *columns.records_bytes())
    assert (again.packed, again.names, again.spilled) == (columns.packed, columns.names, columns.spilled)


def add(columns: MetricColumns, model: list[Row]) -> MetricColumns:
    """`columns` with the rows of `model` appended, as `TaskState.record_score` appends them."""
    for trial, status, seq, outputs in model:
        if status != OK:
            columns.append(trial, status, seq)
            continue
        columns.append(trial, OK, seq, {columns.slot_of(name): cell for name, cell in outputs.items()})
    return columns


def packed(model: list[Row]) -> MetricColumns:
    """The records `TaskState.record_score` appends for these rows."""
    return add(MetricColumns(), model)


@given(rows, st.data())
def test_the_fields_taken_before_more_rows_are_the_records_of_the_rows_before(
    drawn: list[tuple[int, int, dict[str, Cell]]], data: st.DataObject
) -> None:
    """What a savepoint keeps: appending (widening included) makes new objects and leaves
    those taken before as they were."""
    model = [
        (trial, status, seq, outputs if status == OK else {}) for seq, (trial, status, outputs) in enumerate(drawn)
    ]
    kept = data.draw(st.integers(0, len(model)), label="rows before")
    columns = packed(model[:kept])
    taken = (columns.packed, columns.names, columns.spilled)
    check(add(columns, model[kept:]), model)
    columns.packed, columns.names, columns.spilled = taken
    check(columns, model[:kept])


def test_a_score_with_ever_new_output_names_keeps_its_records_narrow() -> None:
    model: list[Row] = [(row, OK, row, {f"output-{row}": (NUMERIC, float(row))}) for row in range(3 * DENSE)]
    columns = packed(model)
    check(columns, model)
    assert len(columns.packed) == len(model) * (13 + 9 * DENSE)  # slots for the first names only


@given(rows)
def test_records_written_on_a_big_endian_machine_are_the_little_endian_bytes_read_back(
    drawn: list[tuple[int, int, dict[str, Cell]]],
) -> None:
    """What the store holds is little-endian whatever the machine: a big-endian one turns
    each field around on the way out and back in."""
    model = [
        (trial, status, seq, outputs if status == OK else {}) for seq, (trial, status, outputs) in enumerate(drawn)
    ]
    columns = packed(model)
    width = columns.width
    big = MetricColumns(
        reordered(columns.packed, record_layout(width), struct.Struct(">iBq" + "Bd" * width)),
        columns.names,
        None if columns.spilled is None else reordered(columns.spilled, SPILLED, struct.Struct(">iIBd")),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "byteorder", "big")
        patch.setattr("projections.packed.records.record_layout", lambda width: struct.Struct(">iBq" + "Bd" * width))
        patch.setattr("projections.packed.records.SPILLED", struct.Struct(">iIBd"))
        stored = big.records_bytes()
        back = MetricColumns.of_bytes(columns.names, *stored)
    assert stored == columns.records_bytes()  # this machine's (little-endian) bytes
    assert (back.packed, back.spilled) == (big.packed, big.spilled)


def test_bytes_that_are_not_whole_records_are_refused() -> None:
    columns = packed([(0, OK, 0, {"score": (NUMERIC, 1.0)})])
    records, _ = columns.records_bytes()
    with pytest.raises(ValueError, match="are not records of 1 slots"):
        MetricColumns.of_bytes(columns.names, records[:-1], None)
    wide = (*columns.names, *NAMES[1 : DENSE + 1])
    with pytest.raises(ValueError, match="are not records of 8 slots"):
        MetricColumns.of_bytes(wide, records, b"")
    with pytest.raises(ValueError, match=f"spilled cells are absent for {DENSE + 1} names"):
        MetricColumns.of_bytes(wide, records * record_layout(DENSE).size, None)
