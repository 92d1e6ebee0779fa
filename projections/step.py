"""One input message, decoded, checked and applied: the step `evalstream replay` and the
worker share, so that "replay equals the worker" holds by construction.

`step` decides everything about a message that does not depend on where it came from or
where its outputs go: whether it is a valid v1 event (else why not), whether a keyed
source keyed it by its run_id, what applying it did, and the summary revision it makes
due, already encoded. The callers differ only in I/O, and in when they publish progress
(replay every N events, the worker on a clock).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from events.codec import DecodeError, decode, encode_payload
from projections.run import Outcome, RunState, apply, summary_due
from projections.summary import summary


@dataclass(frozen=True, slots=True)
class Rejected:
    """Why a message is not applied: a stable `code` and a sentence saying what to fix.
    Codes: those of `events.codec.DecodeError`, "key-mismatch", "refused"."""

    code: str
    detail: str


@dataclass(frozen=True, slots=True)
class Stepped:
    """What one message did. `run` is None only when the message was rejected before it
    could be routed to a run (not a valid event, or keyed for another run)."""

    run: RunState | None
    outcome: Outcome | None
    """None when `rejected` says why the message was not applied."""
    rejected: Rejected | None = None
    task_id: str | None = None
    """The task whose state the event changed (None: the run header, or nothing)."""
    summary: bytes | None = None
    """The encoded `run.summary` revision this event made due, if any."""

    @property
    def applied(self) -> bool:
        return self.outcome is Outcome.APPLIED


RunLookup = Callable[[str], RunState]
"""The state of a run by id, created empty when new (a dict in replay, the run cache
over the stored state in the worker)."""


def step(
    value: bytes, runs: RunLookup, *, position: int | None = None, keyed: bool = False, key: bytes | None = None
) -> Stepped:
    """Apply the message `value` to its run.

    `keyed`: the source has message keys (Kafka), and `key` must then be the event's
    run_id (a missing key is a mismatch too); a file has none. `position`: the event's
    place in its run's log (see `projections.run.apply`)."""
    try:
        event = decode(value)
    except DecodeError as error:
        return Stepped(None, None, Rejected(error.code, str(error)))
    if keyed and key != event.run_id.encode():
        reason = f"message key {key!r} is not the event's run_id {event.run_id!r}; key each event by its run_id"
        return Stepped(None, None, Rejected("key-mismatch", reason))
    run = runs(event.run_id)
    applied = apply(run, event, position)
    if applied.outcome is Outcome.REFUSED:
        return Stepped(run, None, Rejected("refused", applied.reason))
    due = summary_due(run, applied)
    return Stepped(run, applied.outcome, None, applied.task_id, encode_payload(summary(run)) if due else None)
