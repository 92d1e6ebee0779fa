"""Failures injected into the fold's own code: `fault_at(n)` raises `Fault` at the n-th
point the block reaches in `projections/` or `events/` (a line about to run, the first of a
function included), so a loop over n fails a step at every point it has, in turn.

Lines, not calls: a generator closed after a short-circuit (`any(...)`) is "called" again
to finish, where an exception cannot propagate (Python reports it as unraisable); it runs
no line of ours."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import events
import projections

_ROOTS = tuple(str(Path(package.__path__[0])) for package in (projections, events))


class Fault(Exception):
    """The injected failure."""


class Points:
    """How many points a block reached, and whether the fault was raised."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.reached = 0

    @property
    def raised(self) -> bool:
        return self.reached >= self.target


@contextmanager
def fault_at(target: int) -> Iterator[Points]:
    points = Points(target)

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            points.reached += 1
            if points.reached == target:
                # Raised by the trace function, the fault surfaces in the traced frame, at
                # that point; Python then turns tracing off, so no other point fails.
                raise Fault(f"{frame.f_code.co_filename}:{frame.f_lineno} ({event})")
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call" or not frame.f_code.co_filename.startswith(_ROOTS):
            return None
        return local

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield points
    finally:
        sys.settrace(previous)
