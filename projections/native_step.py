"""The step (`projections.step`) through the native fold, for a keyed source (the worker's
events topic): the same rejections, outcomes and summary revisions as `step` gives through the
Python fold, the run held natively (`NativeState`).

A message of a common type that the native reader is certain of is applied to its run from its
bytes, with no model built; any other is decoded in Python (`projections.step.checked`) and its
event applied to the native run through its model. The native apply checks everything before
it changes a run, so there is nothing to roll back: a conversion that raises has changed
nothing, and the message is rejected as "internal-error" as `step` rejects it. A panic inside
the native fold (a bug, which may have left the run half changed) raises `RollbackFailed`, as
the Python fold's step does when it cannot put a run back: whoever holds the run stops.
"""

from __future__ import annotations

from typing import final

from events.models import RunStarted
from projections.fold.declarations import Declarations
from projections.fold.run import Outcome
from projections.native_events import NATIVE, fold_reader, native_apply, refused_started
from projections.native_state import NativeState
from projections.step import Rejected, RollbackFailed, RunLookup, Stepped, checked, failure_detail


@final
class NativeStepper:
    """`step` for keyed messages, through the native fold. `runs` gives held runs whose `run`
    is a `NativeState`."""

    def __init__(self) -> None:
        assert NATIVE is not None, "the native fold is not built"
        self._reader = fold_reader()
        self._panic: type[BaseException] = NATIVE.PanicException

    def step(self, value: bytes, runs: RunLookup, *, position: int | None, key: bytes | None) -> Stepped:
        try:
            return self._step(value, runs, position, key)
        except self._panic as error:  # a BaseException, which interrupts are too
            # An event is routed by its key once it reads as one, so the key names the run.
            run_id = (key or b"").decode(errors="replace")
            raise RollbackFailed(run_id, f"the native fold failed inside an apply ({error})") from error

    def _step(self, value: bytes, runs: RunLookup, position: int | None, key: bytes | None) -> Stepped:
        read = self._reader.apply_keyed(lambda run_id: _state(runs, run_id).native, value, key, position)
        if read is not None:
            assert key is not None  # read only when the key is the event's run id
            outcome_name, task_id = read
            state = _state(runs, key.decode())
        else:
            event = checked(value, keyed=True, key=key)
            if isinstance(event, Stepped):
                return event
            state = _state(runs, event.run_id)
            declarations = Declarations.of(event) if isinstance(event, RunStarted) else None
            try:
                outcome_name = native_apply(state.native, event, position, declarations)
            except Exception as error:  # a conversion refused it before the run changed: a bug
                return Stepped(state, None, Rejected("internal-error", failure_detail(event, error)), failure=error)
            if declarations is not None and outcome_name == Outcome.APPLIED.value:
                state.declarations = declarations
            task_id = getattr(event, "task_id", None)
        outcome = Outcome(outcome_name)
        if outcome is Outcome.REFUSED:
            return Stepped(state, None, Rejected("refused", refused_started(state.run_id, state.native)))
        if outcome is not Outcome.APPLIED:
            return Stepped(state, outcome)
        summary = state.native.summary_bytes() if state.closed else None
        return Stepped(state, outcome, None, task_id, summary)


def _state(runs: RunLookup, run_id: str) -> NativeState:
    state = runs(run_id).run
    assert isinstance(state, NativeState), "a run of the Python fold given to the native step"
    return state
