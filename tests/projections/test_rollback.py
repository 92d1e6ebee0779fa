"""A step fails closed: whatever point of a step raises, the run is exactly as it was
before the event, and the rest of the log folds as if the event had never come."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import codec
from events.codec import encode, encode_payload
from events.models import InputEvent
from projections import step as step_module
from projections.assembly.progress import progress
from projections.fold.run import RunState
from projections.held import Held
from projections.kernels import fingerprint
from projections.step import Stepped, step
from projections.storage import header_of, header_to_bytes, task_to_bytes
from tests import builders
from tests.projections.faults import Fault, fault_at
from tests.strategies import run_logs


def image(run: RunState, log: Sequence[InputEvent]) -> tuple[Any, ...]:
    """Everything of a run that a later step or output can see: its stored parts, as
    `projections.storage` encodes them, and the state derived from them (the summary is a
    function of these; the tests compare the summaries of the rest of the log too)."""
    return (
        header_to_bytes(header_of(run)),
        [(task_id, task_to_bytes(task)) for task_id, task in run.tasks.items()],
        (run.event_count, run.after_close, run.trials_completed, run.trials_failed, run.score_count),
        [run.applied.contains(*fingerprint(event.event_id), run.run_events, run.fingerprints) for event in log],
        len(run.applied),
        {key: (dict(tally.verdicts), tally.unmeasured, tally.pending) for key, tally in run.passk.items()},
        {task_id: (sorted(task.tallies()), task.excluded) for task_id, task in run.tasks.items()},
        encode_payload(progress(run, 1)),
    )


def stepped_through_every_fault(held: Held, event: InputEvent, log: Sequence[InputEvent]) -> Stepped:
    """Step `event` with a fault at its first point, then its second, and so on: each
    failed step must leave the run as it was; returns the step that reached its end. The run
    keeps its summary cache throughout: what a failed step left in it must not show."""
    run = held.run
    before = image(run, log)
    wire = encode(event)
    target = 1
    while True:
        with fault_at(target) as points:
            try:
                stepped = step(wire, lambda _: held)
            except Fault:  # raised before the step's guard (decoding, the savepoint): nothing was applied
                stepped = None
        if not points.raised:
            assert stepped is not None
            return stepped
        if stepped is not None:
            assert stepped.rejected is not None
            assert stepped.rejected.code == "internal-error", stepped.rejected
            assert "Fault" in stepped.rejected.detail  # (pydantic wraps what its serializer's validators raise)
        assert image(run, log) == before, f"a fault at point {target} left a trace"
        target += 1


def clean(log: Sequence[InputEvent]) -> list[bytes | None]:
    held = Held(RunState("run"))
    return [step(encode(event), lambda _: held).summary for event in log]


@settings(max_examples=100, deadline=None)
@given(run_logs(), st.data())
def test_a_fault_at_any_point_of_a_step_leaves_no_trace(log: list[InputEvent], data: st.DataObject) -> None:
    chosen = data.draw(st.integers(0, len(log) - 1), label="event faulted at every point")
    held = Held(RunState("run"))
    outputs = []
    for index, event in enumerate(log):
        if index == chosen:
            outputs.append(stepped_through_every_fault(held, event, log).summary)
        else:
            outputs.append(step(encode(event), lambda _: held).summary)
    assert outputs == clean(log)


def test_every_kind_of_event_fails_closed_at_every_point() -> None:
    """A log with each path of `apply` (a new and a known task, a new and a known metric,
    an undeclared output, a dead trial, failed trials, a late run.started that rekeys the
    run, the close, events after it, a redelivery, a refused second run.started), each
    faulted at every point."""
    spec = builders.task_spec("a", {"reward.score": "continuous", "steps.count": "discrete"})
    log: list[InputEvent] = [
        builders.score("b", "b-1", "reward", {"score": 1.0, "extra": 2.5}),
        builders.trial("a", "a-1", "failed", error_type="Timeout"),
        builders.score("a", "a-1", "reward", {"score": 0.0}),
        builders.started("run", [spec, builders.task_spec("c")], attempts_per_task=2),
        builders.score("a", "a-2", "steps", {"count": 3}),
        builders.dead("a", "a-3", "reward"),
        builders.score("a", "a-2", "reward", {"score": 1e155}),
        builders.closed("run"),
        builders.score("a", "a-4", "reward", {"score": 0.0}),
        builders.trial("c", "c-1"),
        builders.trial("c", "c-2", "failed"),  # a known task's first failure
        builders.trial("a", "a-4", "failed", error_type="Timeout"),
    ]
    log.append(log[2])  # a redelivery
    log.append(builders.started("run", [spec]))  # refused
    held = Held(RunState("run"))
    outputs = [stepped_through_every_fault(held, event, log).summary for event in log]
    assert outputs == clean(log)


def test_a_decode_that_raises_costs_its_message_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad input is always a `DecodeError`; should decoding raise anything else (a bug), that
    message is rejected as internal-error, no run is touched, and the rest of the log folds."""
    log: list[InputEvent] = [
        builders.started("run", [builders.task_spec("a", {"reward.score": "continuous"})]),
        builders.score("a", "a-1", "reward", {"score": 1.0}, event_id="bad"),
        builders.score("a", "a-2", "reward", {"score": 0.0}),
        builders.closed("run"),
    ]

    def decode(raw: bytes | str) -> InputEvent:
        if b'"bad"' in (raw if isinstance(raw, bytes) else raw.encode()):
            raise RecursionError("maximum recursion depth exceeded")
        return codec.decode(raw)

    monkeypatch.setattr(step_module, "decode", decode)
    held = Held(RunState("run"))
    stepped = [step(encode(event), lambda _: held) for event in log]
    rejected = stepped[1].rejected
    assert rejected is not None
    assert (rejected.code, stepped[1].run, type(stepped[1].failure)) == ("internal-error", None, RecursionError)
    assert "decoding failed (RecursionError: maximum recursion depth exceeded)" in rejected.detail
    assert [done.summary for done in stepped[:1] + stepped[2:]] == clean(log[:1] + log[2:])


def test_a_rollback_that_fails_raises_naming_the_run_instead_of_dead_lettering(monkeypatch: pytest.MonkeyPatch) -> None:
    """If the undo itself raises, the run is neither the state before the event nor after
    it: the step raises `RollbackFailed` (whoever holds the run stops) rather than reject the
    event and go on folding into a broken run."""
    runs = {"run": Held(RunState("run"))}
    step(encode(builders.started("run", [builders.task_spec("t")])), runs.__getitem__)

    def broken_apply(*args: object, **kwargs: object) -> None:
        raise RuntimeError("apply broke")

    def broken_rollback(self: object, run: RunState) -> None:
        raise RuntimeError("rollback broke")

    monkeypatch.setattr("projections.step.apply", broken_apply)
    monkeypatch.setattr("projections.step.Savepoint.rollback", broken_rollback)
    with pytest.raises(step_module.RollbackFailed, match=r"run 'run': .*apply broke.*rollback broke") as raised:
        step(encode(builders.trial("t", "t-1", run_id="run")), runs.__getitem__)
    assert raised.value.run_id == "run"
