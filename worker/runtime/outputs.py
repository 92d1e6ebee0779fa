"""What the worker produces: summaries, progress and dead letters, as plain records.

**CloudEvents.** Every record the worker writes to these topics carries the CloudEvents
Kafka binary-mode headers (`cloudevents`), the value unchanged, so that generic Kafka
tooling routes them without parsing JSON: `ce_specversion` 1.0; `ce_type`
`dev.evalstream.run.summary`, `dev.evalstream.run.progress` or `dev.evalstream.deadletter`;
`ce_source` `/evalstream/<app id>`; `ce_id` what the record is, the same however often it is
written (`<run>/summary/<revision>`, `<run>/progress/<seq>`, `<topic>/<partition>/<offset>`
for a message dead-lettered, `<id of the refused output>/refused` for an output the broker
refused); `ce_time` when the worker wrote it (RFC 3339, UTC); `content-type`
`application/json` for summaries and progress, `application/octet-stream` for dead letters,
which hold whatever was received.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal

Headers = tuple[tuple[str, bytes], ...]
Output = Literal["summary", "progress", "deadletter"]

CLOUDEVENT_TYPES: dict[Output, str] = {
    "summary": "dev.evalstream.run.summary",
    "progress": "dev.evalstream.run.progress",
    "deadletter": "dev.evalstream.deadletter",
}
CONTENT_TYPES: dict[Output, bytes] = {
    "summary": b"application/json",
    "progress": b"application/json",
    "deadletter": b"application/octet-stream",
}


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
    event_id: str = ""
    """Its CloudEvents id: what it is, the same each time it is written."""

    def cloudevent(self, source: str, now: datetime | None = None) -> Headers:
        """Its headers with the CloudEvents binary-mode ones first (`source`: `ce_source`)."""
        written = (now or datetime.now(UTC)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return (
            ("ce_specversion", b"1.0"),
            ("ce_id", self.event_id.encode()),
            ("ce_source", source.encode()),
            ("ce_type", CLOUDEVENT_TYPES[self.stream].encode()),
            ("ce_time", written.encode()),
            ("content-type", CONTENT_TYPES[self.stream]),
            *self.headers,
        )


def dead_letter(key: bytes | None, value: bytes, code: str, reason: str, source: Source) -> Publish:
    """The message unchanged, with headers naming the reason and its source coordinates."""
    headers = (
        ("evalstream.reason", code.encode()),
        ("evalstream.detail", reason.encode()[:4096]),
        ("evalstream.source.topic", source.topic.encode()),
        ("evalstream.source.partition", str(source.partition).encode()),
        ("evalstream.source.offset", str(source.offset).encode()),
    )
    return Publish("deadletter", key, value, headers, event_id=f"{source.topic}/{source.partition}/{source.offset}")


def refused_output(item: Publish, why: str, source: Source) -> Publish:
    """The dead letter of an output the broker refused (reason `output-refused`): the output
    unchanged, so that it can be published again once its topic takes it; the detail names
    its stream, run (the key) and size and the broker's error; the source is the event that
    made it (or, for progress, the last event its partition had handled)."""
    run = (item.key or b"").decode(errors="replace")
    detail = f"the broker refused the {item.stream} of run {run!r} ({len(item.value)} bytes): {why}"
    letter = dead_letter(item.key, item.value, "output-refused", detail, source)
    return replace(letter, event_id=f"{item.event_id}/refused")
