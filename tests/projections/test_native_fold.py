"""The native fold's task state (`projections/native/src/fold`) against the Python fold's
(`projections.fold.task.TaskState`), score by score: the same packed records, output names and
spilled cells, trial ids, keys with their (n, c), run-wide tallies and attempt lists."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from events.models import InputEvent, ScoreEmitted
from projections.fold.declarations import Key
from projections.fold.key_tallies import KeyTally
from projections.fold.task import TaskState
from projections.packed.trial_ids import listed
from tests.native import kernels
from tests.projections.test_kernels import same

EVENT: TypeAdapter[InputEvent] = TypeAdapter(InputEvent)
METRICS = ("reward", "steps", "judge")
OUTPUTS = tuple(f"o{index}" for index in range(11))  # more than records.DENSE (8): spilled cells too
KEYS = [(metric, output) for metric in METRICS for output in OUTPUTS]

values = st.one_of(
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 0.5, 1e308]),
    st.sampled_from(["pass", "Infinity", "-Infinity", "NaN"]),
    st.none(),
)


@st.composite
def scores(draw: st.DrawFn) -> dict[str, Any]:
    status = draw(st.sampled_from(["completed", "partial", "failed"]))
    body: dict[str, Any] = {
        "schema_version": 1,
        "type": "score.emitted",
        "event_id": "e",
        "run_id": "r",
        "task_id": "t",
        "trial_id": draw(st.sampled_from(["a", "b", "c", "d", "e\0f", "ü"])),
        "metric_type": draw(st.sampled_from(METRICS)),
        "status": status,
    }
    if status == "failed":
        body["failure"] = draw(st.sampled_from(["trial", "metric"]))
    else:
        names = draw(st.lists(st.sampled_from(OUTPUTS), unique=True, max_size=6))
        body["outputs"] = [{"name": name, "value": draw(values)} for name in names]
    return body


@st.composite
def declarations(draw: st.DrawFn) -> tuple[list[Key], list[Key], list[Key]] | None:
    """None (no declaration), or (attempt keys in order, excluded keys, every declared key)."""
    if draw(st.booleans()):
        return None
    declared = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=8))
    excluded = [key for key in declared if draw(st.booleans())]
    return [key for key in declared if key not in excluded], excluded, declared


def python_rekey(task: TaskState, declared: tuple[list[Key], list[Key], list[Key]] | None) -> None:
    """`TaskState.rekey` with a declaration of those keys (`Declarations` made by hand)."""
    if declared is None:
        task.rekey(None)
        return

    class Declared:
        attempt_keys = tuple(declared[0])
        excluded = frozenset(declared[1])
        kinds = dict.fromkeys(declared[2], "continuous")

    class Declarations:
        tasks = {task.task_id: Declared}

    task.rekey(Declarations)  # type: ignore[arg-type]


def assert_same(task: TaskState, native: Any, eligible: dict[Key, KeyTally]) -> None:
    held = [(name, columns.packed, list(columns.names), columns.spilled) for name, columns in task.metrics()]
    assert native.metrics() == held
    assert native.trials() == listed(task.trials)
    assert native.first_score() == task.first_score
    assert native.tallies() == list(task.tallies())
    assert native.eligible() == [
        (key, (t.verdicts["solved"], t.verdicts["flaky"], t.verdicts["failed"], t.unmeasured, t.moves))
        for key, t in sorted(eligible.items())
    ]
    for metric, columns in task.metrics():
        for output in (*columns.names, "never"):
            assert same(native.attempts(metric, output), columns.read().attempts(output))


@settings(max_examples=300)
@given(st.lists(scores(), max_size=40), st.lists(st.sampled_from(KEYS), unique=True), declarations(), st.data())
def test_scores_and_a_rekey_give_the_python_fold_s_task_byte_for_byte(
    bodies: list[dict[str, Any]],
    eligible_keys: list[Key],
    declared: tuple[list[Key], list[Key], list[Key]] | None,
    data: st.DataObject,
) -> None:
    task = TaskState("t")
    native = kernels().NativeTask("t", eligible_keys)
    eligible = {key: KeyTally() for key in eligible_keys}
    rekey_at = data.draw(st.integers(0, len(bodies)), label="rekey before score")
    for at, body in enumerate(bodies):
        if at == rekey_at:
            python_rekey(task, declared)
            native.rekey(declared)
        event = EVENT.validate_python(body)
        assert isinstance(event, ScoreEmitted)
        seq = 10 * at + 3
        task.record_score(event, seq, eligible)
        outputs = [(output.name, output.value) for output in event.outputs]
        native.record_score(event.trial_id, event.metric_type, event.status, getattr(event, "failure", None), outputs, seq)
        assert_same(task, native, eligible)
    python_rekey(task, declared)
    native.rekey(declared)
    assert_same(task, native, eligible)
