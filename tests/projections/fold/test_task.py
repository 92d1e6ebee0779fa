"""A task keeps its metrics as fields shared with the tasks alike, and hands out views."""

from __future__ import annotations

from projections.packed.records import DENSE, NUMERIC, OK, MetricColumns
from tests.builders import fold, score


def test_tasks_whose_metrics_are_alike_share_their_names() -> None:
    run = fold([score(task, f"{task}-1", metric, {"a": 1.0}) for task in ("t1", "t2") for metric in ("m", "n")])
    first, second = run.tasks["t1"], run.tasks["t2"]
    assert first.metric_names == ("m", "n")
    assert first.metric_names is second.metric_names
    assert first.output_names is second.output_names
    assert first.spilled is None


def test_a_metric_is_a_view_that_changes_nothing_of_the_task() -> None:
    task = fold([score("t", "t-1", "m", {"a": 1.0})]).tasks["t"]
    records = task.records
    view = task.metric("m")
    assert view is not None
    view.append(0, OK, 99, {view.slot_of("b"): (NUMERIC, 2.0)})
    assert task.records is records
    again = task.metric("m")
    assert again is not None
    assert (len(again), again.names) == (1, ("a",))
    assert task.metric("absent") is None


def test_a_task_holds_what_appending_to_its_metrics_directly_holds() -> None:
    """Scores with new outputs widen the records, past `DENSE` names spill: each metric's
    fields are those of a `MetricColumns` given the same rows."""
    names = [f"out-{number}" for number in range(DENSE + 2)]
    events = [score("t", "t-0", "plain", {"a": 0.5})]
    expected = {"plain": MetricColumns(), "wide": MetricColumns()}
    expected["plain"].append(0, OK, 1, {expected["plain"].slot_of("a"): (NUMERIC, 0.5)})
    for number, name in enumerate(names):
        events.append(score("t", f"t-{number}", "wide", {name: float(number), "a": 1.0}))
        columns = expected["wide"]
        cells = {columns.slot_of(name): (NUMERIC, float(number))}
        cells[columns.slot_of("a")] = (NUMERIC, 1.0)
        columns.append(number, OK, number + 2, cells)
    task = fold(events).tasks["t"]
    held = dict(task.metrics())
    assert list(held) == ["plain", "wide"]
    for metric, columns in expected.items():
        assert (held[metric].packed, held[metric].names, held[metric].spilled) == (
            columns.packed,
            columns.names,
            columns.spilled,
        )
    assert task.spilled is not None
    assert task.spilled[0] is None
    assert task.score_rows() == 1 + len(names)
