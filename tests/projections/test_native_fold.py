"""The native fold's state (`projections/native/src/fold`) against the Python fold's, event by
event: a task's (`projections.fold.task.TaskState`) score by score, with the same packed
records, output names and spilled cells, trial ids, keys with their (n, c), run-wide tallies
and attempt lists; a run's (`projections.fold.run.RunState`), with every event's outcome and
the whole state after it."""

from __future__ import annotations

from random import Random
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from events.codec import MAX_EVENT_BYTES, decode, encode
from events.models import EVENT_ID_MAX, NAME_MAX, RUN_ID_MAX, InputEvent, RunStarted, ScoreEmitted
from events.nonfinite import NONFINITE_STRINGS
from projections.fold import run as run_module
from projections.fold.declarations import Declarations, Key
from projections.fold.key_tallies import KeyTally
from projections.fold.run import RunState
from projections.fold.task import TaskState
from projections.packed.trial_ids import listed
from tests.native import kernels
from tests.projections.test_kernels import same
from tests.strategies import run_logs

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
    attempt_keys, excluded, every = declared
    made = SimpleNamespace(
        attempt_keys=tuple(attempt_keys), excluded=frozenset(excluded), kinds=dict.fromkeys(every, "continuous")
    )
    task.rekey(SimpleNamespace(tasks={task.task_id: made}))  # type: ignore[arg-type]


def counts(tally: KeyTally) -> tuple[int, ...]:
    verdicts = tally.verdicts
    return verdicts["solved"], verdicts["flaky"], verdicts["failed"], tally.unmeasured, tally.pending, tally.moves


def assert_same(task: TaskState, native: Any, eligible: dict[Key, KeyTally]) -> None:
    held = [(name, columns.packed, list(columns.names), columns.spilled) for name, columns in task.metrics()]
    assert native.metrics() == held
    assert native.trials() == listed(task.trials)
    assert native.first_score() == task.first_score
    assert native.tallies() == list(task.tallies())
    assert native.eligible() == [(key, counts(tally)) for key, tally in sorted(eligible.items())]
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
        native.record_score(
            event.trial_id, event.metric_type, event.status, getattr(event, "failure", None), outputs, seq
        )
        assert_same(task, native, eligible)
    python_rekey(task, declared)
    native.rekey(declared)
    assert_same(task, native, eligible)


@st.composite
def logs_with_repeats(draw: st.DrawFn) -> list[InputEvent]:
    """A run's log (`tests.strategies.run_logs`) with events given again: the same event (a
    redelivery), or the same with another id (a second run.started, refused; a second
    run.closed, ignored; a score or trial again, perhaps after the close: a late event)."""
    events = draw(run_logs())
    for number in range(draw(st.integers(0, 6))):
        again = draw(st.sampled_from(events))
        if draw(st.booleans()):
            again = again.model_copy(update={"event_id": f"again-{number}"})
        events.insert(draw(st.integers(0, len(events))), again)
    return events


def native_apply(native: Any, event: InputEvent, position: int | None) -> str:
    """Apply `event` to the native run; its outcome's name."""
    moment = run_module._moment(event)
    if not isinstance(event, RunStarted):
        return str(native.apply(event, moment, position))
    declarations = Declarations.of(event)
    tasks = [
        (task_id, (list(declared.attempt_keys), sorted(declared.excluded), list(declared.kinds)))
        for task_id, declared in declarations.tasks.items()
    ]
    return str(native.apply_started(event.event_id, tasks, sorted(declarations.eligible), moment, position))


def assert_same_run(run: RunState, native: Any) -> None:
    header = native.header()
    assert {name: getattr(run, name) for name in header} == header
    assert native.passk() == [(key, counts(tally)) for key, tally in sorted(run.passk.items())]
    held = [
        (
            task.task_id,
            task.first_score,
            listed(task.trials),
            [(name, columns.packed, list(columns.names), columns.spilled) for name, columns in task.metrics()],
            list(task.tallies()),
            sorted(task.excluded),
            task.events,
            task.trial_positions,
            task.first_at,
            task.last_at,
            task.failed_trials,
        )
        for task in run.tasks.values()
    ]
    assert native.tasks() == held


@settings(max_examples=300)
@given(logs_with_repeats(), st.sampled_from(["folded", "offsets", "restored"]), st.randoms(use_true_random=False))
def test_a_run_s_log_gives_the_python_fold_s_state_event_by_event(
    events: list[InputEvent], positions: str, rng: Random
) -> None:
    """Every event's outcome, and after it the whole state: header, counts, tallies and every
    task, with the fold's own positions (replay), a source's offsets (the worker), or
    positions out of arrival order (a run restored in parts, some newer than others)."""
    places: list[int | None] = [None] * len(events)
    if positions == "offsets":
        places = [3 * number + 7 for number in range(len(events))]
    elif positions == "restored":
        places = rng.sample(range(3 * len(events) + 1), len(events))
    run = RunState("run")
    native = kernels().NativeRun("run")
    for event, position in zip(events, places, strict=True):
        assert native_apply(native, event, position) == run_module.apply(run, event, position).outcome.value
        assert_same_run(run, native)


def fold_reader() -> Any:
    """The fold's reader of messages, with the contract's bounds (as `events.compiled` gives
    the recogniser them)."""
    return kernels().FoldReader(EVENT_ID_MAX, RUN_ID_MAX, NAME_MAX, list(NONFINITE_STRINGS.items()), MAX_EVENT_BYTES)


@settings(max_examples=200)
@given(logs_with_repeats(), st.booleans())
def test_messages_read_from_their_bytes_give_what_their_decoded_events_give(
    events: list[InputEvent], offsets: bool
) -> None:
    """A message the native reader takes is applied as its decoded event is; one it leaves
    (a run.started, a timestamp of an uncommon form) is decoded and applied through the model."""
    reader = fold_reader()
    runs: dict[str, Any] = {}
    run = RunState("run")
    taken = 0
    for number, event in enumerate(events):
        position = 3 * number + 7 if offsets else None
        raw = encode(event)
        read = reader.apply(runs, raw, position)
        decoded = decode(raw)
        want = run_module.apply(run, decoded, position).outcome.value
        if read is None:
            native = runs.setdefault("run", kernels().NativeRun("run"))
            assert native_apply(native, decoded, position) == want
        else:
            taken += 1
            assert read == ("run", want)
        assert_same_run(run, runs["run"])
    assert taken >= sum(1 for event in events if not isinstance(event, RunStarted))
