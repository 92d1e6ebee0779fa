"""Real output records for the dashboard's tests: an event log taken through replay's step,
which publishes what the worker publishes, decoded as the dashboard decodes them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from events.codec import encode
from events.models import InputEvent
from events.outputs import RunProgress, RunSummary
from projections.replayer import Replayer
from worker.dashboard.views import RunRecords


def outputs(events: Iterable[InputEvent | dict[str, Any]]) -> tuple[list[RunProgress], list[RunSummary]]:
    """Every progress event (one per applied event, and at close) and summary of the log."""
    replayer = Replayer(progress_every=1)
    progress: list[RunProgress] = []
    summaries: list[RunSummary] = []
    for number, event in enumerate(events, 1):
        line = orjson.dumps(event) if isinstance(event, dict) else encode(event)
        for _, _, output in replayer.feed(number, line):
            if b'"type":"run.progress"' in output:
                progress.append(RunProgress.model_validate_json(output))
            elif b'"type":"run.summary"' in output:
                summaries.append(RunSummary.model_validate_json(output))
    return progress, summaries


def latest(events: Iterable[InputEvent | dict[str, Any]], at: float = 1_000.0) -> RunRecords:
    """A run's records as the board holds them once `events` are all out."""
    progress, summaries = outputs(events)
    assert progress, "the log applied no event"
    return RunRecords(
        progress[-1].run_id,
        progress=progress[-1],
        progress_at=at,
        summary=summaries[-1] if summaries else None,
        summary_at=at if summaries else None,
    )
