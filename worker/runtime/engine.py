"""The worker's hot path between its consumer and the broker, without faust.

faust's fetcher task calls the engine once per fetch (`worker.runtime.consumer`): `tick`
before it, `handle` with each events partition's records after it. Everything the worker
does to its state therefore happens on that one task, in order: seeks, handling, sealing
checkpoints, publishing progress. What waits on the broker (claiming a partition, writing a
checkpoint) runs beside it.

**A partition's life** (`Owned`, one per partition the group gives the worker):
- CLAIMING: its producer is started, fencing every earlier one, and its local copy restored
  to what was committed (`worker.runtime.ownership`); then the processor reads its checkpoint;
- SEEKING: the seek to one past the checkpoint waits until the rebalance is over, then runs
  on the fetcher task right before a fetch, so every record of the partition handed over
  afterwards was fetched after it (aiokafka drops what it fetched for a stale position);
- READY: its records are handled; records of a partition in any other phase are dropped,
  since they are read again after its seek.
A partition whose state can no longer be trusted is claimed again from the start, with a
new `Owned`: when its producer is fenced (another worker took it over, or the broker
aborted a transaction that ran past its timeout: claimed again after `reclaim_after`
seconds, unless the group moves it meanwhile), when the broker refused a run's state (that
run parked), or when a new producer's claim finds changelog records it did not write (a
checkpoint whose outcome was not known had committed, or another worker wrote meanwhile).
Its uncommitted events are handled again from its checkpoint, and since the checkpoint's
outputs committed with it, none is published twice.

**Checkpoints** (`worker.runtime.checkpoint`, where the order of writes is). A partition
gathers one checkpoint while at most one other is written. One is sealed every
`flush_interval` seconds, or when `flush_every` events or `FLUSH_BYTES` of outputs have
gathered, or as soon as it holds progress (readers wait for it: a partition's progress
comes once a progress window, `worker.runtime.progress`), if the one before it is written by
then. Changes alone whose progress window ends within a flush interval wait for it and go
with the progress: at low rates a checkpoint a window, none being written when the progress
falls due. When one is due by its events or bytes while the one before it is still being
written, the fetcher waits for it. So a broker slower than the fetcher slows the worker
down rather than growing it: at most two checkpoints' changes and outputs, each of
`flush_every` events plus the rest of one fetched batch, are held beyond the cache's bound.

**Retired runs.** A batch that names a run retired out of the hot store (a late event after
its close) waits, before it is handled, for the run's archive record, read back by offset.
A slow read is asked again (counted), never given up on while the partition is this
worker's; a record that is gone, or not the run's, parks the run: its events are
dead-lettered (`archive-lost`), the partition's other runs go on.

**Ownership.** `revoked` (a rebalance or a stop has begun) bumps the epoch, so that nothing
begun before it seeks or publishes; it waits (at most `timeout`) for the checkpoints being
written, closes the producers (together, each within `CLOSE_SECONDS` twice: its abort, then
its close) and drops every run. So a revocation ends within `timeout` plus
`2 * CLOSE_SECONDS` and a little, whatever the broker does; what it left open the next
owner's claim aborts.

**Failures.** Every error of a claim or a checkpoint is sorted by what the client raised
(`worker.runtime.refusals`): a refusal of a record is dead-lettered (or its run parked) and
the partition goes on; a fatal error stops the worker, saying what to grant or set; a fenced
producer waits for the group (`reclaim_after`); anything else renews the partition's
producer and writes again, after a wait that doubles from `retry_after` up to
`MOST_BACKOFF`. A partition that fails `FAILING_AFTER` times in a row is said to be failing,
once, with its cause and what to do, and `/ready` says so until it writes again.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from projections.step import Rejected, RollbackFailed
from projections.storage import ArchiveRef, digest_of
from worker.runtime.archive import Found, Read, Slow
from worker.runtime.changes import Snapshot
from worker.runtime.checkpoint import Checkpoint, Refused, StateRefused
from worker.runtime.ownership import Claim, Claims, Fatal
from worker.runtime.processor import Processor, Record
from worker.runtime.refusals import advice, fatal, why_fatal
from worker.runtime.store import Change
from worker.runtime.transactions import fenced

log = logging.getLogger("evalstream.worker")

FLUSH_BYTES = 32 * 2**20
"""Bytes of outputs a partition gathers before a checkpoint is due whatever its events: the
outputs wait in memory until their checkpoint writes them."""

ARCHIVE_LOST = "archive-lost"
STATE_REFUSED = "state-refused"

FAILING_AFTER = 3
"""Failures in a row after which a partition is said to be failing: logged once with its
cause and what to do, counted in `EngineCounts.failing` (the metrics, and `/ready`)."""
MOST_BACKOFF = 30.0
"""The longest wait between two tries of a failing partition (the waits double from
`retry_after`)."""


class Seeker(Protocol):
    async def seek(self, partition: int, offset: int) -> None:
        """Make the next fetch of the events partition start at `offset`."""
        ...


class Archive(Protocol):
    async def read(self, partition: int, offset: int) -> Read: ...


class CommittedStore(Protocol):
    def apply(self, partition: int, changes: Iterable[Change], offset: int) -> None:
        """Put a committed checkpoint's changelog records in the local copy, with the offset
        of its checkpoint record."""
        ...


class Phase(Enum):
    CLAIMING = "claiming"
    SEEKING = "seeking"
    READY = "ready"


@dataclass(eq=False)
class Owned:
    partition: int
    incarnation: int
    gathering: Checkpoint
    phase: Phase = Phase.CLAIMING
    claim: Claim | None = None
    """Its claim, once made: its producer."""
    claiming: asyncio.Task[None] | None = None
    writing: asyncio.Task[None] | None = None
    checkpointed_at: float = -math.inf


@dataclass
class EngineCounts:
    """What the engine did, since the worker started (read by `worker.runtime.metrics`)."""

    fenced: int = 0
    """Times a partition's producer was fenced (another worker took it over, or a
    transaction ran past its timeout)."""
    redone: int = 0
    """Times a partition was read again from its checkpoint (fenced, failed, a run parked)."""
    refusals: int = 0
    """Checkpoints written again without what the broker refused."""
    abandoned: int = 0
    """Checkpoints still being written when a revocation's wait was over."""
    archive_retries: int = 0
    """Archive reads asked again because the broker had not answered."""
    parked: dict[str, int] = field(default_factory=dict)
    """Reason -> runs parked for it."""
    failures: int = 0
    """Claims and checkpoints that failed with neither a refusal nor a fencing (each tried
    again with a new producer)."""
    failing: dict[int, str] = field(default_factory=dict)
    """Partition -> the last error of the failures in a row it is in, once they number
    `FAILING_AFTER`; gone at its next success."""


class Engine:
    def __init__(
        self,
        processor: Processor,
        claims: Claims,
        store: CommittedStore,
        seeker: Seeker,
        *,
        archive: Archive,
        flush_interval: float,
        clock: Callable[[], float],
        on_failure: Callable[[BaseException], Awaitable[None]],
        on_checkpoint: Callable[[float], None] = lambda seconds: None,
        reclaim_after: float = 10.0,
        retry_after: float = 1.0,
        write_timeout: float = 60.0,
    ) -> None:
        """`on_failure`: stop the worker (an error that reading the partition again would
        meet again: a newer store, an events topic recreated, a grant or a setting the
        cluster refuses the worker: `worker.runtime.refusals.fatal`). `on_checkpoint`: told the seconds each
        checkpoint took, from its seal until applied. `reclaim_after`: seconds a fenced
        partition waits for the group before it is claimed again (the session timeout).
        `retry_after`: seconds before a failed claim or checkpoint is first tried again.
        `write_timeout`: seconds a checkpoint's write may take (the transaction timeout)."""
        self.processor = processor
        self.claims = claims
        self.store = store
        self.seeker = seeker
        self.archive = archive
        self.flush_interval = flush_interval
        self.clock = clock
        self.on_failure = on_failure
        self.on_checkpoint = on_checkpoint
        self.reclaim_after = reclaim_after
        self.retry_after = retry_after
        self.write_timeout = write_timeout
        self.counts = EngineCounts()
        self.epoch = 0
        self.owned: dict[int, Owned] = {}
        self._assignment: frozenset[int] | None = None
        """The partitions assigned since the last revocation (None: none yet)."""
        self._incarnations: dict[int, int] = {}
        """Partition -> the incarnation of its latest claim: a checkpoint of an earlier one
        is not put in the local copy (a later claim may have restored newer records)."""
        self._seeks: dict[int, int] = {}
        """Partition -> where to seek it once the rebalance is over."""
        self._told: set[tuple[int, str]] = set()
        """(partition, run id) of slow archive reads already logged."""
        self._streaks: dict[int, int] = {}
        """Partition -> its failures in a row (claims or checkpoints)."""

    # Ownership

    def assigned(self, partitions: Iterable[int]) -> None:
        """The group gave the worker these partitions: claim each."""
        self._assignment = frozenset(partitions)
        for partition in self._assignment:
            self._claim(partition)

    async def revoked(self, timeout: float) -> None:
        """Partitions may go to another worker: commit what each has gathered (after the
        checkpoint being written), waiting at most `timeout` seconds, then close the
        producers and drop every run. What is not committed by then is redone by the next
        owner."""
        self.epoch += 1
        self._assignment = None
        owned, self.owned = list(self.owned.values()), {}
        self._seeks.clear()
        for held in owned:
            if held.claiming is not None:
                held.claiming.cancel()
        writing = [asyncio.ensure_future(self._last(held)) for held in owned if held.phase is Phase.READY]
        if writing:
            _, late = await asyncio.wait(writing, timeout=timeout)
            for task in late:
                task.cancel()
            if late:
                self.counts.abandoned += len(late)
                log.error(
                    "%d checkpoints still being written after %.0f s were abandoned; check the broker",
                    len(late),
                    timeout,
                )
        await asyncio.gather(
            *(task for held in owned for task in (held.claiming, held.writing) if task is not None),
            return_exceptions=True,
        )
        await asyncio.gather(*(_closed(held.claim) for held in owned if held.claim is not None))
        self.processor.forget()

    async def _last(self, held: Owned) -> None:
        """The partition's last checkpoint before it goes: what gathered since the one being
        written."""
        try:
            if held.writing is not None:
                await asyncio.wait([held.writing])
            self._seal(held)
            if held.writing is not None:
                await asyncio.wait([held.writing])
        except asyncio.CancelledError:
            if held.writing is not None:
                held.writing.cancel()
            raise

    def ready(self, partition: int) -> bool:
        held = self.owned.get(partition)
        return held is not None and held.phase is Phase.READY

    @property
    def consuming(self) -> bool:
        """Whether every partition of the last assignment is claimed and sought to its
        checkpoint, so that its records are handled (true with no partitions at all: a
        worker the group has nothing for is healthy and idle)."""
        return self._assignment is not None and all(self.ready(partition) for partition in self._assignment)

    @property
    def checkpointing(self) -> bool:
        """Whether a checkpoint is being written."""
        return any(held.writing is not None and not held.writing.done() for held in self.owned.values())

    def _claim(self, partition: int, delay: float = 0.0) -> None:
        """Claim `partition` (after `delay` seconds), as a new incarnation."""
        held = self._incarnation(partition)
        held.claiming = asyncio.ensure_future(self._claimed(held, delay))

    def _incarnation(self, partition: int) -> Owned:
        """A new incarnation of `partition`: what the worker held of it is dropped."""
        incarnation = self._incarnations[partition] = self._incarnations.get(partition, 0) + 1
        held = self.owned[partition] = Owned(partition, incarnation, Checkpoint(partition, self.processor.topic))
        self._seeks.pop(partition, None)
        self.processor.forget([partition])
        return held

    def _current(self, held: Owned) -> bool:
        return self.owned.get(held.partition) is held

    async def _claimed(self, held: Owned, delay: float) -> None:
        await asyncio.sleep(delay)
        while True:
            try:
                claim = await self.claims.claim(held.partition)
                break
            except Fatal as error:
                await self._stop(error)
                return
            except Exception as error:
                if not self._current(held):
                    return
                if (cause := fatal(error)) is not None:
                    await self._stop(Fatal(why_fatal(cause)))
                    return
                await asyncio.sleep(self._failed(held.partition, "claiming it", error))
        if not self._current(held):
            await _closed(claim)
            return
        self._succeeded(held.partition)
        await self._adopt(held, claim)

    async def _adopt(self, held: Owned, claim: Claim) -> None:
        """The partition claimed: read its checkpoint, and seek to it once the rebalance is over."""
        held.claim = claim
        try:
            resume = self.processor.assign([held.partition], claim.events_topic, {held.partition: claim.events_end})
        except Exception as error:  # a newer store, or an events topic recreated or truncated
            await self._stop(error)
            return
        self._seeks[held.partition] = resume[held.partition]
        held.phase = Phase.SEEKING

    async def _stop(self, error: BaseException) -> None:
        log.critical("stopping: %s", error)
        await self.on_failure(error)

    # The fetcher task's calls

    async def tick(self, rebalancing: bool) -> None:
        """Before each fetch: make the pending seeks (once the rebalance is over), gather
        the progress that is due, and seal the checkpoints that are due: those holding
        progress at once, the others by time (changes alone, with the progress when that
        is due within a flush interval)."""
        if rebalancing:
            return
        epoch = self.epoch
        while self._seeks and epoch == self.epoch:
            partition, offset = self._seeks.popitem()
            held = self.owned[partition]
            log.info("resuming partition %d at offset %d (its checkpoint)", partition, offset)
            await self.seeker.seek(partition, offset)
            if self._current(held) and held.phase is Phase.SEEKING:
                held.phase = Phase.READY
        if epoch != self.epoch:
            return
        now = self.clock()
        for partition, item in self.processor.progress_due(now):
            if self.ready(partition):
                self.owned[partition].gathering.add([item])
        due = set(self.processor.unsaved())
        for held in list(self.owned.values()):
            if held.phase is not Phase.READY:
                continue
            pending = held.partition in due or held.gathering.outputs
            timely = pending and now - held.checkpointed_at >= self.flush_interval and not self._rides(held, now)
            if held.gathering.progress or timely:
                self._seal(held)

    def _rides(self, held: Owned, now: float) -> bool:
        """Whether the partition's changes, due by time, wait for its progress instead: they
        hold no output, and its progress window ends within a flush interval. One
        transaction instead of two, and none being written when the progress falls due."""
        ends = self.processor.progress_window_end(held.partition)
        return not held.gathering.outputs and ends is not None and ends - now <= self.flush_interval

    async def handle(self, partition: int, records: Sequence[Record]) -> None:
        """A batch of one events partition's records, fetched after the last `tick`."""
        held = self.owned.get(partition)
        if held is None or held.phase is not Phase.READY:
            return  # fetched before the partition's seek: it is read again after it
        archives = await self._archives(held, records)
        if archives is None or not self._current(held) or held.phase is not Phase.READY:
            return  # the partition moved, or was claimed again: the batch is read again
        try:
            items = self.processor.handle(partition, records, self.clock(), archives)
        except RollbackFailed as error:
            # Nothing of the broken run is committed: a restart reads it again from what was.
            held.phase = Phase.CLAIMING
            await self._stop(error)
            return
        held.gathering.add(items)
        if self.processor.checkpoint_due(partition) or held.gathering.output_bytes >= FLUSH_BYTES:
            writing = held.writing
            if writing is not None and not writing.done():
                # Backpressure: the broker is slower than the fetcher. Waiting here (the
                # fetcher's task) is what bounds the changes in memory to two checkpoints'.
                await asyncio.wait([writing])
            if self._current(held):
                self._seal(held)

    def _seal(self, held: Owned) -> None:
        """Seal the gathering checkpoint and write it, unless one is being written (the next
        one takes what gathers meanwhile)."""
        if held.writing is not None and not held.writing.done():
            return
        if self.processor.refused is not None:
            return  # the worker stops: nothing more is written
        partition = held.partition
        state = self.processor.partitions.get(partition)
        last = state.next_offset - 1 if state is not None and state.next_offset is not None else -1
        checkpoint, held.gathering = held.gathering, Checkpoint(partition, self.processor.topic)
        checkpoint.seal(self.processor.snapshot(partition), last)
        held.checkpointed_at = self.clock()
        if not checkpoint.empty:
            held.writing = asyncio.ensure_future(self._write(held, checkpoint, held.checkpointed_at))

    async def _write(self, held: Owned, checkpoint: Checkpoint, began: float) -> None:
        """Write a sealed checkpoint (sealed at `began`); on a refusal, again without what
        was refused; on any other failure, again with a new producer, after a wait that
        grows while the partition keeps failing. A write is given the transaction timeout:
        past it the broker aborts the transaction anyway."""
        while True:
            assert held.claim is not None
            try:
                await asyncio.wait_for(
                    checkpoint.write(held.claim.producer, owner=lambda: self._latest(held), applied=self._applied),
                    self.write_timeout,
                )
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if not self._current(held):
                    # Revoked meanwhile: the next owner reads what was committed and meets any
                    # refusal itself; claiming again here would fence it.
                    return
                if isinstance(error, Refused):
                    self.counts.refusals += 1
                    checkpoint.amend(error, self.processor.counts)
                elif isinstance(error, StateRefused):
                    for run_id, why in error.runs.items():
                        self._park(held.partition, run_id, STATE_REFUSED, f"the broker refused the run's state: {why}")
                    await self._redo(held, 0.0, f"the broker refused the state of runs {sorted(error.runs)}")
                    return
                elif (cause := fatal(error)) is not None:
                    await self._stop(Fatal(why_fatal(cause)))
                    return
                elif fenced(error):
                    self.counts.fenced += 1
                    await self._redo(
                        held,
                        self.reclaim_after,
                        f"its producer was fenced ({error!r}): another worker took it over, "
                        "or its transaction ran past the timeout",
                    )
                    return
                else:
                    await asyncio.sleep(self._failed(held.partition, "a checkpoint", error))
                    if not self._current(held):
                        return
                if not await self._renewed(held):
                    return
                continue
            self._succeeded(held.partition)
            self.on_checkpoint(self.clock() - began)
            return

    def _failed(self, partition: int, what: str, error: BaseException) -> float:
        """Count a failure of `partition` that said nothing about its records; the seconds
        to wait before trying again."""
        self.counts.failures += 1
        streak = self._streaks[partition] = self._streaks.get(partition, 0) + 1
        wait = min(self.retry_after * 2.0 ** (streak - 1), MOST_BACKOFF)
        if streak < FAILING_AFTER:
            log.warning(
                "partition %d: %s failed (%r); trying again with a new producer in %.0f s", partition, what, error, wait
            )
        elif streak == FAILING_AFTER:
            log.error(
                "partition %d has failed %d times in a row, last %s (%r): %s. Trying again every %.0f s at most; "
                "nothing is lost meanwhile, and /ready says not ready until it succeeds",
                partition,
                streak,
                what,
                error,
                advice(error),
                MOST_BACKOFF,
            )
        if streak >= FAILING_AFTER:
            self.counts.failing[partition] = repr(error)
        return wait

    def _succeeded(self, partition: int) -> None:
        streak = self._streaks.pop(partition, 0)
        if self.counts.failing.pop(partition, None) is not None:
            log.warning("partition %d writes again, after %d failures in a row", partition, streak)

    async def _renewed(self, held: Owned) -> bool:
        """A new producer for a checkpoint written again after a refusal (aiokafka's cannot
        write a partition after one); False if the partition was claimed again instead."""
        assert held.claim is not None
        await _closed(held.claim)
        try:
            claim = await self.claims.claim(held.partition)
        except Exception as error:
            if self._current(held):
                await self._redo(held, self.retry_after, f"claiming it again after a refusal failed ({error!r})")
            return False
        if not self._current(held):
            await _closed(claim)
            return False
        if claim.moved:  # another worker committed meanwhile: what this one holds is stale
            self.counts.redone += 1
            log.warning(
                "partition %d is read again from its checkpoint: another worker wrote it meanwhile", held.partition
            )
            await self._adopt(self._incarnation(held.partition), claim)
            return False
        held.claim = claim
        return True

    async def _redo(self, held: Owned, delay: float, why: str) -> None:
        self.counts.redone += 1
        log.warning(
            "partition %d is read again from its checkpoint%s: %s",
            held.partition,
            f" in {delay:.0f} s" if delay else "",
            why,
        )
        self._claim(held.partition, delay)
        if held.claim is not None:
            await _closed(held.claim)

    def _latest(self, held: Owned) -> bool:
        """Whether no claim of the partition was made since `held`'s (a checkpoint committed
        during a revocation's wait is still the latest word on the partition)."""
        return self._incarnations.get(held.partition) == held.incarnation

    def _applied(self, snapshot: Snapshot, changes: list[Change], offset: int, retired: dict[str, ArchiveRef]) -> None:
        self.store.apply(snapshot.partition, changes, offset)
        self.processor.written(snapshot, retired)

    def _park(self, partition: int, run_id: str, reason: str, why: str) -> None:
        log.error(
            "run %r is parked (%s): %s; its events are dead-lettered, the partition's other runs go on",
            run_id,
            reason,
            why,
        )
        self.counts.parked[reason] = self.counts.parked.get(reason, 0) + 1
        self.processor.park(partition, run_id, Rejected(reason, why))

    async def _archives(self, held: Owned, records: Sequence[Record]) -> dict[str, bytes] | None:
        """The archive records of the retired runs `records` name (None: the partition moved
        meanwhile). Asked again after each read, until nothing more is needed: a checkpoint
        under way may retire another of the batch's runs meanwhile."""
        fetched: dict[str, bytes] = {}
        while needed := self.processor.archives_needed(held.partition, records, fetched):
            for run_id, ref in needed.items():
                value = await self._archive_record(held, run_id, ref)
                if not self._current(held):
                    return None
                if value is not None:
                    fetched[run_id] = value
        return fetched

    async def _archive_record(self, held: Owned, run_id: str, ref: ArchiveRef) -> bytes | None:
        """The run's archive record; None if it is gone (the run is parked then) or the
        partition moved while it was asked for."""
        wait = self.retry_after
        while self._current(held):
            read = await self.archive.read(ref.partition, ref.offset)
            if isinstance(read, Slow):
                self.counts.archive_retries += 1
                if (held.partition, run_id) not in self._told:
                    self._told.add((held.partition, run_id))
                    log.warning(
                        "the archive record of run %r (%s[%d]@%d) is slow to come; asking again until it does",
                        run_id,
                        "archive",
                        ref.partition,
                        ref.offset,
                    )
                await asyncio.sleep(wait)
                wait = min(wait * 2, 30.0)
                continue
            value = read.value if isinstance(read, Found) and read.key == run_id.encode() else None
            if value is not None and digest_of(value) == ref.digest:
                return value
            what = "another record" if isinstance(read, Found) else "missing"
            self._park(
                held.partition,
                run_id,
                ARCHIVE_LOST,
                f"run {run_id!r} is retired and its archive record (archive partition {ref.partition}, offset "
                f"{ref.offset}) is {what}: the archive topic was deleted or changed, and the run's state with it. "
                "Its other runs are safe; to bring this one back, replay the events topic into a new app id",
            )
            return None
        return None


async def _closed(claim: Claim) -> None:
    try:
        await claim.producer.abort()
        await claim.producer.close()
    except Exception as error:  # closing a fenced or disconnected producer: nothing of it can commit
        log.debug("closing a producer: %r", error)
