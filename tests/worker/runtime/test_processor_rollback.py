"""The Python fold's rollback in the worker: a step that raises after its event changed the
run puts the run back (the native fold checks an event whole before it changes a run, so it
has nothing to put back: `projections.native_step`)."""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable
from typing import Any

import pytest

import projections.step
from events.codec import encode, encode_payload
from projections.assembly.summary import summary, summary_bytes
from projections.fold.run import RunState
from tests.builders import fold
from tests.worker.runtime.test_processor import records, small_run
from worker.commands.replay import replay
from worker.runtime.processor import Processor


def test_a_step_that_raises_is_dead_lettered_and_leaves_its_run_as_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The close's summary raises once (after apply closed the run): the close is
    dead-lettered as internal-error, the run is open again, and the same close sent again
    gives revision 1, the bytes replay gives for the same log and the same failure."""
    events = small_run("run")
    log = [*events, events[-1]]
    monkeypatch.setattr(projections.step, "summary_bytes", failing_once(summary_bytes))
    processor = Processor(native=False)
    published = processor.handle(0, records(log), 0.0)
    [dead] = [item for item in published if item.stream == "deadletter"]
    headers = dict(dead.headers)
    assert (headers["evalstream.reason"], headers["evalstream.source.offset"]) == (b"internal-error", b"3")
    assert b"RuntimeError: injected" in headers["evalstream.detail"]
    assert b"The run is as it was before this event" in headers["evalstream.detail"]
    assert processor.counts.dead_lettered == {"internal-error": 1}
    assert processor.counts.applied == len(events)
    sent = [item.value for item in published if item.stream == "summary"]
    assert sent == [encode_payload(summary(fold(events)))]
    monkeypatch.setattr(projections.step, "summary_bytes", failing_once(summary_bytes))
    out, err = io.BytesIO(), io.StringIO()
    replay([encode(event) for event in log], out, err, native=False)  # the worker's fold, failing the same way
    assert out.getvalue().splitlines() == sent
    assert err.getvalue().startswith(f"line {len(events)}: internal-error: run.closed")


def failing_once(function: Callable[..., bytes]) -> Callable[..., bytes]:
    calls = itertools.count()

    def failing(run: RunState, *args: Any) -> bytes:
        if next(calls) == 0:
            raise RuntimeError("injected")
        return function(run, *args)

    return failing
