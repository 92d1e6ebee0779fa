"""One input message, decoded, checked and applied: the step `evalstream replay` and the
worker share, so that "replay equals the worker" holds by construction.

`step` decides everything about a message that does not depend on where it came from or
where its outputs go: whether it is a valid v1 event (else why not), whether a keyed
source keyed it by its run_id, what applying it did, and the summary revision it makes
due, already encoded. The callers differ only in I/O, and in when they publish progress
(replay every N events, the worker on a clock).

A step fails closed: if applying the event or building the summary it makes due raises,
the run is rolled back to what it was before the event (`projections.fold.savepoint`) and the
message is rejected with the code "internal-error", so that the worker dead-letters it,
replay reports it and goes on, and both fold the rest of the log from the same state. If the
rollback itself raises, the step raises `RollbackFailed`, naming the run: its state is no
longer one any log gives, and both stop rather than fold or store it. A
decode that raises anything but `DecodeError` (a bug: bad input is always a `DecodeError`)
is rejected the same way, touching no run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, final

from events.codec import DecodeError, decode
from events.models import InputEvent
from projections.assembly.summary import summary_bytes
from projections.fold.run import Outcome, RunState, apply, summary_due
from projections.fold.savepoint import Savepoint
from projections.held import FoldState, HeldRun, summaries_of


@dataclass(frozen=True, slots=True)
class Rejected:
    """Why a message is not applied: a stable `code` and a sentence saying what to fix.
    Codes: those of `events.codec.DecodeError`, "key-mismatch", "refused", and
    "internal-error" (a valid event whose step raised: a bug; the run is as before it)."""

    code: str
    detail: str


@final
class Stepped:
    """What one message did. `run` is None only when the message was rejected before it
    could be routed to a run (not a valid event, or keyed for another run). A plain class
    with `Final` fields, made once per message: the compiled fold builds it natively, where a
    NamedTuple's constructor is Python code and a frozen dataclass's `__init__` sets each
    field through `object.__setattr__` (~1 us a message)."""

    __slots__ = ("failure", "outcome", "rejected", "run", "summary", "task_id")

    def __init__(
        self,
        run: FoldState | None,
        outcome: Outcome | None,
        rejected: Rejected | None = None,
        task_id: str | None = None,
        summary: bytes | None = None,
        *,
        failure: Exception | None = None,
    ) -> None:
        self.run: Final = run
        self.outcome: Final = outcome
        """None when `rejected` says why the message was not applied."""
        self.rejected: Final = rejected
        self.task_id: Final = task_id
        """The task whose state the event changed (None: the run header, or nothing)."""
        self.summary: Final = summary
        """The encoded `run.summary` revision this event made due, if any."""
        self.failure: Final = failure
        """What the step raised, for an "internal-error" (the caller may log its traceback)."""

    @property
    def applied(self) -> bool:
        return self.outcome is Outcome.APPLIED


RunLookup = Callable[[str], HeldRun]
"""A held run by id, its state created empty when new (a dict in replay, the run cache over
the stored state in the worker)."""


def step(
    value: bytes, runs: RunLookup, *, position: int | None = None, keyed: bool = False, key: bytes | None = None
) -> Stepped:
    """Apply the message `value` to its run.

    `keyed`: the source has message keys (Kafka), and `key` must then be the event's
    run_id (a missing key is a mismatch too); a file has none. `position`: the event's
    place in its run's log (see `projections.fold.run.apply`)."""
    event = checked(value, keyed=keyed, key=key)
    if isinstance(event, Stepped):
        return event
    held = runs(event.run_id)
    run = held.run
    assert isinstance(run, RunState), "a run of the native fold given to the Python step"
    saved = Savepoint(run, event)
    try:
        applied = apply(run, event, position)
        if applied.outcome is Outcome.REFUSED:
            return Stepped(run, None, Rejected("refused", applied.reason))
        due = summary_bytes(run, summaries_of(held)) if summary_due(run, applied) else None
        return Stepped(run, applied.outcome, None, applied.task_id, due)
    except Exception as error:
        try:
            saved.rollback(run)
        except Exception as failed:
            raise RollbackFailed(
                event.run_id,
                f"an event could not be applied ({type(error).__name__}: {error}), and the run could not be put back "
                f"as it was before it ({type(failed).__name__}: {failed})",
            ) from failed
        return Stepped(run, None, Rejected("internal-error", failure_detail(event, error)), failure=error)
    except BaseException:  # an interrupt: the run stays consistent for whoever goes on with it
        saved.rollback(run)
        raise


def checked(value: bytes, *, keyed: bool = False, key: bytes | None = None) -> InputEvent | Stepped:
    """The event of message `value`, or what rejects it before any run: not a valid event, or
    (`keyed`) keyed by another run's id."""
    try:
        event = decode(value)
    except DecodeError as error:
        return Stepped(None, None, Rejected(error.code, str(error)))
    except Exception as error:
        detail = f"decoding failed ({type(error).__name__}: {error}). This is a bug in evalstream: report it"
        return Stepped(None, None, Rejected("internal-error", detail), failure=error)
    if keyed and key != event.run_id.encode():
        reason = f"message key {key!r} is not the event's run_id {event.run_id!r}; key each event by its run_id"
        return Stepped(None, None, Rejected("key-mismatch", reason))
    return event


class RollbackFailed(Exception):
    """A step failed, and its run could not be put back (the Python fold's rollback raised, or
    the native fold failed inside an apply): the run's state is no longer one any log gives,
    and nothing may fold into it or store it. Whoever holds it must stop."""

    def __init__(self, run_id: str, what: str) -> None:
        """`what`: what failed, and how."""
        super().__init__(f"run {run_id!r}: {what}. This is a bug in evalstream: report it with the run's events")
        self.run_id = run_id


def failure_detail(event: InputEvent, error: Exception) -> str:
    """What an "internal-error" rejection of `event` says: what raised, and that the run is as before."""
    return (
        f"{event.type} {event.event_id!r} of run {event.run_id!r} could not be applied: "
        f"{type(error).__name__}: {error}. The run is as it was before this event. This is a bug in "
        "evalstream: report it with this event"
    )
