"""The worker's hot path between its consumer and the broker, without faust.

faust's fetcher task calls the engine once per fetch (`worker.runtime.consumer`): `tick`
before it, `handle` with each events partition's records after it. Everything the worker
does to its state therefore happens on that one task, in order: rewinds, handling, taking
checkpoint snapshots, publishing progress. What waits on the broker (a checkpoint's
acknowledgements) runs beside it, one checkpoint per partition at a time
(`worker.runtime.checkpoint`, where the order of writes is written down).

**Backpressure.** A partition's changes are in memory from the event that makes them
until its checkpoint's writes are acknowledged (the cache pins their runs). One checkpoint
is written while the next gathers; when the gathering one is due (`flush_every` events)
and the one before it is still being written, the fetcher waits for it. So a broker slower
than the fetcher slows the worker down rather than growing it: at most two checkpoints'
changes, each of `flush_every` events plus the rest of one fetched batch, are held beyond
the cache's bound.

**Rewind.** After each assignment, every events partition is read again from its
checkpoint (`Processor.assign`). The seek waits until the rebalance is over, then runs
on the fetcher task right before a fetch, so every record of that partition handed over
afterwards was fetched after the seek (aiokafka drops what it fetched for a stale
position); records of a partition whose seek has not been made are dropped, since they are
read again after it. Nothing fetched before a rewind is ever handled after it.

**Refused outputs.** An output the broker refuses for good (too large for its topic, not
authorised: `worker.runtime.refusals`), whether the producer raises it at once or the
broker answers it, is handled once: counted, logged and replaced by its dead letter
(`worker.runtime.outputs.refused_output`), which the checkpoint waits for instead, so the
partition goes on. Sent again after a restart, it would be refused again: without this
the partition would fail at the same offset for ever.

**Retired runs.** A batch that names a run retired out of the hot store (a late event
after its close: `worker.runtime.processor`) waits, before it is handled, for the run's
archive record, read back by offset; one that is not there, or not the run's, stops the
worker (the run's state is gone, and folding the event into an empty run would be wrong).

**Ownership.** `revoked` (a rebalance or a stop has begun) bumps the epoch: handling and
checkpoints begun before it write nothing more, it waits for the checkpoints in flight and
for every changelog write to be acknowledged, so that the next owner restores all of it,
and it drops the cache.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from projections.storage import digest_of
from worker.runtime.checkpoint import Archive, Changelog, Sent, checkpoint
from worker.runtime.commits import Commits
from worker.runtime.outputs import Publish, Source, refused_output
from worker.runtime.processor import Processor, Record
from worker.runtime.refusals import refusal

log = logging.getLogger("evalstream.worker")


class Outputs(Protocol):
    async def send(self, item: Publish) -> Awaitable[Any]:
        """Send to the item's topic (keyed, partitioned by key); the awaitable resolves once
        the broker has acknowledged it."""
        ...


class Seeker(Protocol):
    async def seek(self, partition: int, offset: int) -> None:
        """Make the next fetch of the events partition start at `offset`."""
        ...


class Engine:
    def __init__(
        self,
        processor: Processor,
        outputs: Outputs,
        changelog: Changelog,
        seeker: Seeker,
        *,
        archive: Archive,
        flush_interval: float,
        clock: Callable[[], float],
        on_failure: Callable[[BaseException], Awaitable[None]],
        on_checkpoint: Callable[[float], None] = lambda seconds: None,
    ) -> None:
        """`on_failure`: what to do when an output or a changelog write failed other than
        by the broker's refusal of an output (a timeout, a lost broker, a refused changelog
        write): stop the worker, since going on would pass over what was lost.
        `on_checkpoint`: told the seconds each checkpoint took, from its snapshot until it
        was durable (the metrics' histogram)."""
        self.processor = processor
        self.outputs = outputs
        self.changelog = changelog
        self.seeker = seeker
        self.archive = archive
        self.flush_interval = flush_interval
        self.clock = clock
        self.on_failure = on_failure
        self.on_checkpoint = on_checkpoint
        self.epoch = 0
        self._assignment: frozenset[int] | None = None
        """The partitions assigned since the last revocation (None: none yet)."""
        self._seeks: dict[int, int] = {}
        """Partition -> where to seek it once the rebalance is over."""
        self._ready: set[int] = set()
        """Partitions sought to their checkpoint: their records are handled."""
        self._unacknowledged: dict[int, list[Sent]] = {}
        """Partition -> outputs sent since its last snapshot."""
        self._checkpoints: dict[int, asyncio.Task[None]] = {}
        self._checkpointed_at: dict[int, float] = {}
        self._sending: dict[int, asyncio.Future[None]] = {}
        """Partition -> the sending of its last batch's outputs."""
        self._commits = Commits(changelog.commit)
        self.abandoned = 0
        """Checkpoints cancelled at a revocation because the broker had not answered them."""

    # Ownership

    def assigned(self, partitions: Iterable[int]) -> dict[int, int]:
        """Partitions are assigned (faust's table recovery is done): where each will be read from."""
        self._assignment = frozenset(partitions)
        self._seeks = self.processor.assign(self._assignment)
        self._ready.clear()
        self._unacknowledged.clear()
        return dict(self._seeks)

    async def commit_checkpoints(self, resume: Mapping[int, int]) -> bool:
        """Commit, for each newly assigned partition, the offset it is read again from
        (`assigned`), after any commit of it still under way; whether all were taken."""
        return await self._commits.now(resume)

    async def revoked(self, timeout: float) -> None:
        """Partitions may go to another worker: write nothing more, and wait until what was
        written is acknowledged, at most `timeout` seconds. Checkpoints still waiting past
        it are cancelled, counted in `abandoned` and logged: they would hold their snapshots
        for as long as the broker does not answer, one more set at each rebalance. Their
        partitions are read again from their last durable checkpoint by the next owner."""
        self.epoch += 1
        self._assignment = None
        self._seeks.clear()
        self._ready.clear()
        self._unacknowledged.clear()
        self._commits.forget()
        self.processor.forget()
        running = list(self._checkpoints.values())
        if running:
            _, late = await asyncio.wait(running, timeout=timeout)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
            if late:
                self.abandoned += len(late)
                log.error(
                    "%d checkpoints still waiting for the broker after %.0fs were abandoned; check the broker",
                    len(late),
                    timeout,
                )
        self._checkpoints.clear()

    def ready(self, partition: int) -> bool:
        return partition in self._ready

    @property
    def consuming(self) -> bool:
        """Whether every partition of the last assignment is restored and sought to its
        checkpoint, so that its records are handled (true with no partitions at all: a
        worker the group has nothing for is healthy and idle)."""
        return self._assignment is not None and self._assignment <= self._ready

    @property
    def checkpointing(self) -> bool:
        """Whether a checkpoint is under way."""
        return bool(self._checkpoints)

    # The fetcher task's calls

    async def tick(self, rebalancing: bool) -> None:
        """Before each fetch: make the pending seeks (once the rebalance is over), publish
        the progress that is due, and start the checkpoints that are due by time."""
        if rebalancing:
            return
        epoch = self.epoch
        while self._seeks and epoch == self.epoch:
            partition, offset = self._seeks.popitem()
            log.info("resuming partition %d at offset %d (its checkpoint)", partition, offset)
            await self.seeker.seek(partition, offset)
            if epoch == self.epoch:
                self._ready.add(partition)
        if epoch != self.epoch:
            return
        now = self.clock()
        for partition, item in self.processor.progress_due(now):
            await self._send(partition, [item], epoch)
        for partition in self.processor.unsaved():
            if now - self._checkpointed_at.get(partition, -1e9) >= self.flush_interval:
                self._start_checkpoint(partition, epoch)

    async def handle(self, partition: int, records: Sequence[Record]) -> None:
        """A batch of one events partition's records, fetched after the last `tick`."""
        if partition not in self._ready:
            return  # fetched before the partition's rewind: it is read again after it
        archives = await self._archives(partition, records)
        if archives is None or partition not in self._ready:
            return  # the worker stops, or a rebalance began: the batch is read again
        items = self.processor.handle(partition, records, self.clock(), archives)
        # Shielded: faust cancels its fetcher task on a stop, and a batch whose state has
        # changed must have all its outputs sent before a snapshot can cover it.
        sending = self._sending[partition] = asyncio.ensure_future(self._send(partition, items, self.epoch))
        await asyncio.shield(sending)
        if self.processor.checkpoint_due(partition):
            writing = self._checkpoints.get(partition)
            if writing is not None:
                # Backpressure: the broker is slower than the fetcher. Waiting here (the
                # fetcher's task) is what bounds the changes in memory to two checkpoints'.
                await asyncio.shield(writing)
            self._start_checkpoint(partition, self.epoch)

    async def _archives(self, partition: int, records: Sequence[Record]) -> dict[str, bytes] | None:
        """The archive records of the retired runs `records` name (None: one is lost, and
        the worker stops). Asked again after each read, until nothing more is needed: the
        checkpoint under way may retire another of the batch's runs meanwhile."""
        fetched: dict[str, bytes] = {}
        while needed := self.processor.archives_needed(partition, records, fetched):
            for run_id, ref in needed.items():
                record = await self.archive.read(ref.partition, ref.offset)
                value = record[1] if record is not None and record[0] == run_id.encode() else None
                if value is not None and digest_of(value) == ref.digest:
                    fetched[run_id] = value
                    continue
                what = "missing" if record is None else "another record"
                error = LookupError(
                    f"run {run_id!r} is retired and its archive record (archive partition {ref.partition}, "
                    f"offset {ref.offset}) is {what}: the archive topic was deleted or changed, and the run's "
                    "state with it; replay the events topic into a new app id"
                )
                log.critical("stopping: %s", error)
                await self.on_failure(error)
                return None
        return fetched

    async def _send(self, partition: int, items: list[Publish], epoch: int) -> None:
        for item in items:
            sent = await self._sent(partition, item)
            if sent is not None and epoch == self.epoch:
                self._unacknowledged.setdefault(partition, []).append(sent)

    async def _sent(self, partition: int, item: Publish) -> Sent | None:
        """`item` sent, or its dead letter if the producer refused it at once (None: that
        was refused too)."""
        try:
            return item, await self.outputs.send(item)
        except Exception as error:
            return await self._refused(partition, item, error)

    async def _refused(self, partition: int, item: Publish, error: Exception) -> Sent | None:
        """Handle an output the broker refused, once: counted (`Counts.refused`), logged,
        and dead-lettered (`refused_output`), so the partition goes on instead of failing on
        it again and again. Returns the dead letter sent (None: a dead letter refused in
        turn, which is counted and logged only). Raises `error` if it is no refusal."""
        why = refusal(error)
        if why is None:
            raise error
        counts = self.processor.counts
        counts.refuse(item.stream)
        run = (item.key or b"").decode(errors="replace")
        if item.stream == "deadletter":
            log.error("the broker refused a dead letter of run %r: %r; it is lost, see the dead-letter topic", run, why)
            return None
        log.error(
            "the broker refused the %s of run %r (%d bytes): %r; dead-lettered as output-refused, partition %d goes on",
            item.stream,
            run,
            len(item.value),
            why,
            partition,
        )
        counts.dead_letter("output-refused")
        source = item.source or self._last_handled(partition)
        return await self._sent(partition, refused_output(item, repr(why), source))

    def _last_handled(self, partition: int) -> Source:
        state = self.processor.partitions.get(partition)
        offset = state.next_offset - 1 if state is not None and state.next_offset is not None else -1
        return Source(self.processor.topic, partition, offset)

    def _start_checkpoint(self, partition: int, epoch: int) -> None:
        sending = self._sending.get(partition)
        if epoch != self.epoch or partition in self._checkpoints or (sending is not None and not sending.done()):
            return  # one checkpoint per partition at a time: the next one takes what gathers meanwhile
        snapshot = self.processor.snapshot(partition)
        if snapshot is None:
            return
        outputs = self._unacknowledged.pop(partition, [])
        began = self._checkpointed_at[partition] = self.clock()

        async def run() -> None:
            try:
                durable = await checkpoint(
                    snapshot,
                    outputs,
                    self.processor,
                    self.changelog,
                    self.archive,
                    still_owner=lambda: epoch == self.epoch,
                    commit=self._commits.request,
                    refused=lambda item, error: self._refused(partition, item, error),
                )
                if durable:
                    self.on_checkpoint(self.clock() - began)
            except Exception as error:
                log.error("checkpoint of partition %d at offset %d failed: %r", partition, snapshot.offset, error)
                await self.on_failure(error)
            finally:
                if self._checkpoints.get(partition) is task:
                    del self._checkpoints[partition]

        task = asyncio.ensure_future(run())
        self._checkpoints[partition] = task
