"""What each line of an event log makes `evalstream replay` write: the per-line part of
replay, pure (lines in, output bytes out), so that it is compiled with the fold. The reading
and writing, and the split across processes, are `worker.commands.replay`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from events.codec import encode_payload
from projections.assembly.progress import progress
from projections.closed_caches import CLOSED_CACHES_BYTES, ClosedCaches
from projections.fold.run import Outcome, RunState
from projections.held import Held, summaries_of
from projections.step import step

STDOUT, STDERR = 1, 2
Output = tuple[int, int, bytes]
"""(line number, stream, bytes) of one thing replay writes."""


@dataclass(slots=True)
class ReplayStats:
    lines: int = 0
    applied: int = 0
    redeliveries: int = 0
    ignored: int = 0
    skipped: int = 0
    summaries: int = 0
    open_runs: int = 0

    def add(self, other: ReplayStats) -> None:
        for name in ("applied", "redeliveries", "ignored", "skipped", "summaries", "open_runs"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def message_of(line: bytes) -> bytes | None:
    """A line of a log without its line ending; None for a blank line, which replay skips."""
    if not line or line.isspace():
        return None
    return line.rstrip(b"\r\n")


def rejected(number: int, code: str, detail: str, where: str | None = None) -> Output:
    """What replay writes of a message it skips: where it is (by default "line `number`"),
    why (the rejection's code) and what was wrong."""
    return (number, STDERR, f"{where or f'line {number}'}: {code}: {detail}\n".encode())


class Replayer:
    """Every run seen so far, and what each line of the log makes replay write."""

    def __init__(self, progress_every: int | None = None, closed_caches_bytes: int = CLOSED_CACHES_BYTES) -> None:
        """`closed_caches_bytes`: the budget of the closed runs' summary caches (`ClosedCaches`)."""
        self.runs: dict[str, Held] = {}
        self.progress_every = progress_every
        self.stats = ReplayStats()
        self.closed_caches = ClosedCaches(closed_caches_bytes)

    def feed(self, number: int, line: bytes) -> Sequence[Output]:
        """What line `number` of a file makes replay write."""
        value = message_of(line)
        return () if value is None else self.apply(number, value)

    def feed_lines(self, first: int, lines: list[bytes]) -> list[Output]:
        """What lines `first`, `first` + 1, ... of a file make replay write."""
        return [output for number, line in enumerate(lines, first) for output in self.feed(number, line)]

    def apply(
        self, number: int, value: bytes, where: str | None = None, *, key: bytes | None = None, keyed: bool = False
    ) -> Sequence[Output]:
        """What one message makes replay write; `where` names it in a rejection (by
        default "line `number`"). A keyed message (from the events topic) takes the worker's
        key check, and its `number` is its offset, the position the worker gives it."""
        stepped = step(value, self._run, position=number if keyed else None, keyed=keyed, key=key)
        if stepped.rejected is not None:
            self.stats.skipped += 1
            return [rejected(number, stepped.rejected.code, stepped.rejected.detail, where)]
        run = stepped.run
        if stepped.outcome is not Outcome.APPLIED or run is None:
            self.stats.redeliveries += stepped.outcome is Outcome.REDELIVERY
            self.stats.ignored += stepped.outcome is Outcome.IGNORED
            return ()
        self.stats.applied += 1
        held = self.runs[run.run_id]
        run = held.run
        self.closed_caches.revised(held)
        if stepped.summary is None and not self.progress_every:
            return ()
        outputs = []
        if self.progress_every and (run.closed or run.event_count % self.progress_every == 0):
            shown = progress(run, run.event_count, cache=summaries_of(held))
            outputs.append((number, STDOUT, encode_payload(shown) + b"\n"))
        if stepped.summary is not None:
            self.stats.summaries += 1
            outputs.append((number, STDOUT, stepped.summary + b"\n"))
        return outputs

    def apply_keyed(self, offset: int, value: bytes, where: str, key: bytes | None) -> Sequence[Output]:
        """What the events topic's message at `offset`, keyed `key`, makes replay write."""
        return self.apply(offset, value, where, key=key, keyed=True)

    def _run(self, run_id: str) -> Held:
        held = self.runs.get(run_id)
        if held is None:
            held = self.runs[run_id] = Held(RunState(run_id))
        return held

    def finish(self) -> ReplayStats:
        # A run whose only events failed (and were rolled back) has nothing applied: not a run.
        self.stats.open_runs = sum(1 for held in self.runs.values() if not held.run.closed and held.run.event_count)
        return self.stats
