"""What the worker does with one consumed message, without Kafka: decode, check the key,
apply, and say what to publish. The faust app (`worker.app`) moves the bytes.

Runs live in memory here; the summary, harbor and verdicts bytes it publishes come from
the same projection code as `evalstream replay`, so they are identical for the same log.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from events.codec import DecodeError, decode, encode_payload
from projections.progress import progress
from projections.run import Outcome, RunState, apply, summary_due
from projections.summary import summary

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a consumed message came from."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Publish:
    """One message to produce: `stream` is "summary", "progress" or "deadletter"."""

    stream: str
    key: bytes | None
    value: bytes
    headers: Headers = ()


def dead_letter(key: bytes | None, value: bytes, code: str, reason: str, source: Source) -> Publish:
    """The message unchanged, with headers naming the reason and its source coordinates."""
    headers = (
        ("evalstream.reason", code.encode()),
        ("evalstream.detail", reason.encode()[:4096]),
        ("evalstream.source.topic", source.topic.encode()),
        ("evalstream.source.partition", str(source.partition).encode()),
        ("evalstream.source.offset", str(source.offset).encode()),
    )
    return Publish("deadletter", key, value, headers)


@dataclass
class Processor:
    progress_interval: float = 0.25
    runs: dict[str, RunState] = field(default_factory=dict)
    _progress_seq: dict[str, int] = field(default_factory=dict)
    _dirty: dict[str, float] = field(default_factory=dict)
    """Runs with progress not yet published -> when the first unpublished change landed."""
    _published_at: dict[str, float] = field(default_factory=dict)

    def handle(self, key: bytes | None, value: bytes, source: Source) -> list[Publish]:
        try:
            event = decode(value)
        except DecodeError as error:
            return [dead_letter(key, value, error.code, str(error), source)]
        if key != event.run_id.encode():
            reason = f"message key {key!r} is not the event's run_id {event.run_id!r}; key each event by its run_id"
            return [dead_letter(key, value, "key-mismatch", reason, source)]
        run = self.runs.get(event.run_id)
        if run is None:
            run = self.runs[event.run_id] = RunState(event.run_id)
        applied = apply(run, event)
        if applied.outcome is Outcome.REFUSED:
            return [dead_letter(key, value, "refused", applied.reason, source)]
        if applied.outcome is not Outcome.APPLIED:
            return []
        self._dirty.setdefault(run.run_id, time.monotonic())
        out = []
        if run.closed:
            out.extend(self.progress_due(force=run.run_id))
        if summary_due(run, applied):
            out.append(Publish("summary", key, encode_payload(summary(run))))
        return out

    def progress_due(self, now: float | None = None, force: str | None = None) -> list[Publish]:
        """Coalesced progress: a run's changes are published at most every
        `progress_interval` seconds (`force`: this run now, as when it closes)."""
        now = time.monotonic() if now is None else now
        out = []
        for run_id in list(self._dirty):
            if run_id != force and now - self._published_at.get(run_id, 0.0) < self.progress_interval:
                continue
            del self._dirty[run_id]
            self._published_at[run_id] = now
            seq = self._progress_seq[run_id] = self._progress_seq.get(run_id, 0) + 1
            out.append(Publish("progress", run_id.encode(), encode_payload(progress(self.runs[run_id], seq))))
        return out
