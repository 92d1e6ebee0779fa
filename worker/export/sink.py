"""What every exporter is: a sink that writes run summaries somewhere, idempotent by (run, revision).

A sink takes a batch of summaries (at most one per run: the newest the batch read of it) and
answers, per run, that it wrote it, that it already holds that revision or a later one
(unchanged: nothing written, nothing doubled), or that it refused it and why (the run is
named on stderr and the rest goes on). A destination that cannot be reached at all raises
`SinkUnavailable`: the batch is not committed, so a restart writes it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from events.outputs import RunSummary

WRITTEN: Final = "written"
UNCHANGED: Final = "unchanged"
REFUSED: Final = "refused"


@dataclass(frozen=True, slots=True)
class Exported:
    """One summary to write, as it was read."""

    summary: RunSummary
    raw: bytes
    """The record's bytes, as published."""
    published: float
    """When it was published (seconds since the epoch): its Kafka timestamp, or a file's
    modification time."""


@dataclass(frozen=True, slots=True)
class Result:
    run_id: str
    revision: int
    outcome: str
    """WRITTEN, UNCHANGED or REFUSED."""
    reason: str = ""
    """Why it was refused."""


class SinkUnavailable(Exception):
    """The destination cannot be written at all (down, not writable): a sentence for the user."""


class Sink(Protocol):
    name: str
    """What it writes to, for messages: "MLflow at http://...", "Parquet in out/"."""

    def write(self, batch: Sequence[Exported]) -> list[Result]:
        """Write each run's summary (one per run); a result per summary, in order."""
        ...
