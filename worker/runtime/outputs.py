"""What the worker produces: summaries, progress and dead letters, as plain records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Headers = tuple[tuple[str, bytes], ...]
Output = Literal["summary", "progress", "deadletter"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a consumed message came from."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Publish:
    """One message to produce."""

    stream: Output
    key: bytes | None
    value: bytes
    headers: Headers = ()
    source: Source | None = field(default=None, compare=False)
    """The event that made it, when one did (a summary's); coalesced progress has none."""


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


def refused_output(item: Publish, why: str, source: Source) -> Publish:
    """The dead letter of an output the broker refused (reason `output-refused`): the output
    unchanged, so that it can be published again once its topic takes it; the detail names
    its stream, run (the key) and size and the broker's error; the source is the event that
    made it (or, for progress, the last event its partition had handled)."""
    run = (item.key or b"").decode(errors="replace")
    detail = f"the broker refused the {item.stream} of run {run!r} ({len(item.value)} bytes): {why}"
    return dead_letter(item.key, item.value, "output-refused", detail, source)
