"""The event factories (`events.builders`), and a fold of events into a run state."""

from __future__ import annotations

from collections.abc import Iterable

from events.builders import broken, closed, dead, score, started, task_spec, trial
from events.models import InputEvent
from projections.run import RunState, apply

__all__ = ["broken", "closed", "dead", "fold", "score", "started", "task_spec", "trial"]


def fold(events: Iterable[InputEvent], run_id: str = "run") -> RunState:
    """A run state with `events` applied in order."""
    run = RunState(run_id)
    for event in events:
        apply(run, event)
    return run
