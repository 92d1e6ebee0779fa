"""What each line of an event log makes `evalstream replay` write, through the native fold
(`projections.kernels.native_fold`): `Replayer`'s outputs, byte for byte, progress included
(tests/projections/test_native_fold.py and test_native_progress.py hold the two to each other).

A line of a common type that the native reader is certain of is applied to its run from its
bytes; any other line is decoded in Python (`projections.step.checked`, the same rejections as
`Replayer`'s) and its event applied to the native run: a run.started with the declarations the
Python fold reads (`Declarations.of`), any other through its model.

The native apply checks everything before it changes a run, so a step has nothing to roll back;
a failure inside it is a bug (a panic), and replay stops on it rather than go on with a run no
log gives (as it stops when `Replayer` cannot put a run back: `projections.step.RollbackFailed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from projections.closed_caches import CLOSED_CACHES_BYTES, ClosedCaches
from projections.native_events import NATIVE, fold_reader, native_apply, refused_started
from projections.replayer import STDOUT, Output, Replayer, ReplayStats, message_of, rejected
from projections.step import Stepped, checked


class NativeReplayer:
    """Every run seen so far, held by the native fold, and what each line makes replay write."""

    def __init__(self, progress_every: int | None = None, closed_caches_bytes: int = CLOSED_CACHES_BYTES) -> None:
        """`progress_every`: a run's progress is written every that many applied events of
        it, and at its close, as `Replayer` writes it (None or 0: never).
        `closed_caches_bytes`: the budget of the closed runs' summary caches (`ClosedCaches`),
        kept after each line, or each run of lines the native reader applies at once."""
        assert NATIVE is not None, "the native fold is not built"
        self._native = NATIVE
        self.progress_every = progress_every
        self.runs: dict[str, Any] = {}
        """Run id -> its `NativeRun`."""
        self.stats = ReplayStats()
        self.closed_caches = ClosedCaches(closed_caches_bytes)
        self._reader = fold_reader()

    def feed(self, number: int, line: bytes) -> Sequence[Output]:
        """What line `number` of a file makes replay write."""
        value = message_of(line)
        return () if value is None else self._written(number, self.apply(value))

    def apply_keyed(self, offset: int, value: bytes, where: str, key: bytes | None) -> Sequence[Output]:
        """What the events topic's message at `offset`, keyed `key`, makes replay write: the
        worker's key check, and its offset as its position (`Replayer.apply_keyed`); `where`
        names it in a rejection."""
        read = self._reader.apply_keyed(self._run, value, key, offset)
        if read is not None:
            assert key is not None  # read only when the key is the event's run id
            return self._written(offset, (key.decode(), read[0]), where)
        event = checked(value, keyed=True, key=key)
        if isinstance(event, Stepped):
            return self._written(offset, event, where)
        return self._written(offset, (event.run_id, native_apply(self._run(event.run_id), event, offset)), where)

    def _written(self, number: int, applied: tuple[str, str] | Stepped, where: str | None = None) -> Sequence[Output]:
        """What replay writes of message `number`, given what applying it did."""
        if isinstance(applied, Stepped):
            assert applied.rejected is not None
            return self._rejected(number, applied.rejected.code, applied.rejected.detail, where)
        run_id, outcome = applied
        if outcome == "refused":
            return self._rejected(number, "refused", refused_started(run_id, self.runs[run_id]), where)
        if outcome != "applied":
            self.stats.redeliveries += outcome == "redelivery"
            self.stats.ignored += outcome == "ignored"
            return ()
        self.stats.applied += 1
        run = self.runs[run_id]
        closed = run.closed()
        if not closed and not self.progress_every:
            return ()
        outputs = []
        count = run.event_count()
        if self.progress_every and (closed or count % self.progress_every == 0):
            outputs.append((number, STDOUT, run.progress_bytes(count) + b"\n"))
        if closed:
            self.stats.summaries += 1
            outputs.append((number, STDOUT, run.summary_bytes() + b"\n"))
            self.closed_caches.used(run_id, run)
        return outputs

    def feed_lines(self, first: int, lines: list[bytes]) -> list[Output]:
        """What lines `first`, `first` + 1, ... of a file make replay write: those the native
        reader takes applied in one call, each other one as `feed` takes it."""
        outputs: list[Output] = []
        at = 0
        while at < len(lines):
            revised: list[str] = []
            stop, written, counts = self._reader.replay_lines(self.runs, lines, at, self.progress_every, revised)
            for run_id in revised:
                self.closed_caches.used(run_id, self.runs[run_id])
            outputs.extend((first + index, STDOUT, output) for index, output in written)
            applied, redelivered, ignored, summaries = counts
            self.stats.applied += applied
            self.stats.redeliveries += redelivered
            self.stats.ignored += ignored
            self.stats.summaries += summaries
            if stop < len(lines):
                outputs.extend(self.feed(first + stop, lines[stop]))
            at = stop + 1
        return outputs

    def apply(self, value: bytes) -> tuple[str, str] | Stepped:
        """Apply message `value` (a line without its end) to its run, made when new: (its run
        id, the outcome's name), or the rejection of a message no run can take."""
        read: tuple[str, str] | None = self._reader.apply(self.runs, value, None)
        if read is not None:
            return read
        event = checked(value)
        if isinstance(event, Stepped):
            return event
        return event.run_id, native_apply(self._run(event.run_id), event, None)

    def _run(self, run_id: str) -> Any:
        """The `NativeRun` of `run_id`, made when new."""
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = self._native.NativeRun(run_id)
        return run

    def _rejected(self, number: int, code: str, detail: str, where: str | None) -> Sequence[Output]:
        self.stats.skipped += 1
        return [rejected(number, code, detail, where)]

    def finish(self) -> ReplayStats:
        # A run whose only events were refused has nothing applied: not a run.
        self.stats.open_runs = sum(1 for run in self.runs.values() if not run.closed() and run.event_count())
        return self.stats


class LineReplayer(Protocol):
    """What a replay asks of the fold: the outputs of each line or run of lines of a file, or
    of each message of the events topic, then the stats."""

    stats: ReplayStats

    def feed(self, number: int, line: bytes) -> Sequence[Output]: ...

    def feed_lines(self, first: int, lines: list[bytes]) -> list[Output]: ...

    def apply_keyed(self, offset: int, value: bytes, where: str, key: bytes | None) -> Sequence[Output]: ...

    def finish(self) -> ReplayStats: ...


def replayer(
    progress_every: int | None = None, closed_caches_bytes: int = CLOSED_CACHES_BYTES, *, native: bool = True
) -> LineReplayer:
    """The fold a replay goes through: the native one where it is built, unless
    `native` is False (a benchmark's baseline); else the Python fold (`closed_caches_bytes`
    bounds the closed runs' summary caches in either)."""
    if native and NATIVE is not None:
        return NativeReplayer(progress_every, closed_caches_bytes)
    return Replayer(progress_every, closed_caches_bytes)
