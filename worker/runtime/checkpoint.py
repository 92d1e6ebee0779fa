"""The one place a checkpoint is written, and the order that keeps every promise."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from worker.runtime.outputs import Publish
from worker.runtime.processor import Processor, Retirement, Snapshot
from worker.runtime.refusals import refusal

log = logging.getLogger("evalstream.worker")

Sent = tuple[Publish, Awaitable[Any]]
"""An output and its acknowledgement by the broker."""


class Changelog(Protocol):
    """The worker's state on the broker: a changelog partitioned like the events topic."""

    async def write(self, partition: int, key: bytes, value: bytes | None) -> Awaitable[Any]:
        """Send a record to the changelog (`value` None: a tombstone, which deletes the
        key); the awaitable resolves once the broker has acknowledged it, and raises if it
        refused it. Awaiting it, once acknowledged, puts the record in the local store (never
        one the changelog lacks; `checkpoint` awaits them in the order written, a partition's
        order), and after a checkpoint record records its offset: the local copy is then the
        changelog up to that offset (`worker.runtime.changelog`)."""
        ...

    async def commit(self, partition: int, offset: int) -> bool:
        """Commit `offset` as the consumer group's position of the events partition
        (`worker.runtime.commits` makes them one at a time); whether the coordinator took it."""
        ...


class Archive(Protocol):
    """Retired runs' archive records: a compacted topic keyed by run id, partitioned like
    the events topic (`worker.runtime.archive`)."""

    async def write(self, partition: int, key: bytes, value: bytes) -> Awaitable[int]:
        """Send a record; the awaitable resolves to its offset once the broker has
        acknowledged it, and raises if it refused it."""
        ...

    async def read(self, partition: int, offset: int) -> tuple[bytes | None, bytes | None] | None:
        """(key, value) of the record at `offset`; None: no record there (any more)."""
        ...


async def checkpoint(
    snapshot: Snapshot,
    outputs: Sequence[Sent],
    processor: Processor,
    changelog: Changelog,
    archive: Archive,
    *,
    still_owner: Callable[[], bool],
    commit: Callable[[int, int], None],
    refused: Callable[[Publish, Exception], Awaitable[Sent | None]],
) -> bool:
    """Make `snapshot` durable: the events partition's state as of `snapshot.offset`.

    The order, each step begun only when the one before it is done:
    1. every output of the events the checkpoint covers (`outputs`: their summaries,
       progress and dead letters) is acknowledged by the broker; one the broker refused
       for good is handed to `refused`, which dead-letters it (returning the dead letter,
       acknowledged in turn here) or raises when the error was no refusal;
    2. the archive record of every run the snapshot retires is written to the archive and
       acknowledged (one the broker refuses for good leaves its run hot, logged);
    3. the records of the parts those events changed are written (a run back from its
       archive: every part, the header last), then, for each run retired, a marker at its
       header key naming its archive record's offset, then tombstones for its task keys;
    4. the checkpoint record, naming the last offset covered, is written;
    5. every changelog write of steps 3 and 4 is acknowledged by the broker (each reaches
       the local copy as it is: `Changelog.write`), and only then may the snapshot's runs
       leave the cache, since a run that left is restored from the local copy;
    6. the offset after the checkpoint is handed to `commit`, which commits it when the
       partition's commit under way is done (`worker.runtime.commits`): the checkpoint is
       durable at step 5, and the next one need not wait for a commit.

    Why this order. After a crash or a rebalance, a partition is read again from one past
    its checkpoint, and an event that a record already holds is skipped by its fingerprint,
    so an event covered by a durable record or checkpoint is never handled again: its
    outputs must be durable first (1 before 2 and 3), or they are lost for good. The
    changelog keeps one partition's writes in order, so a store that holds a checkpoint
    holds every record written before it (3 before 4). A marker replaces a run's parts, so
    the record it names must be durable before it is (2 before 3), and it comes before the
    tombstones, so that every prefix of a run's records leaves the run whole: its parts, or
    its marker; likewise a run back from its archive keeps its marker until every part is
    back. Only a closed run whose parts an acknowledged checkpoint holds (its summary is
    durable before them) and that nothing changed since is retired, and the archive record
    is those parts as the local copy holds them, so the archive says what the parts said.
    The committed offset only reports progress (lag), and faust seeks to it when a partition
    is assigned, so it must never pass a checkpoint the broker might still lose (5 before
    6). The local copy is what a restart on the same machine starts from, so it must never
    hold a write the broker might lose: it gets each write once acknowledged (5), never at 3
    or 4.

    `still_owner` is asked before every write: once the partition may belong to another
    worker (a rebalance or a stop has begun), nothing more is written (what was is still
    waited for), and the next owner redoes these events from the last durable checkpoint.
    An output refused for good (too large, not authorised: `worker.runtime.refusals`) is
    covered once its dead letter is durable: reading it again would be refused again, so
    the refusal, made visible, is its outcome. Returns whether it got as far as the
    commit. Any other failure of an output or a write raises, and the worker must stop
    rather than go on past an output it lost."""
    waiting = list(outputs)
    while waiting:
        item, sent = waiting.pop(0)
        try:
            await sent
        except Exception as error:
            replaced = await refused(item, error)
            if replaced is not None:
                waiting.append(replaced)
    if not still_owner():
        return False
    retired = await _archived(snapshot, archive)
    writes: tuple[tuple[bytes, bytes | None], ...] = (*snapshot.records, *retired, snapshot.checkpoint)
    acknowledgements = []
    for key, value in writes:
        if not still_owner():
            break
        acknowledgements.append(await changelog.write(snapshot.partition, key, value))
    # Even when cut short: the next owner must find every write made (see `Engine.revoked`).
    for acknowledged in acknowledgements:
        await acknowledged
    if len(acknowledgements) < len(writes):
        return False
    processor.written(snapshot)
    if not still_owner():
        return False
    commit(snapshot.partition, snapshot.offset + 1)
    return True


async def _archived(snapshot: Snapshot, archive: Archive) -> list[tuple[bytes, bytes | None]]:
    """Step 2: the snapshot's archive records, acknowledged; the changelog records that
    retire the runs whose record the broker took."""
    sent: list[tuple[Retirement, Awaitable[int] | BaseException]] = []
    for retirement in snapshot.retirements:
        try:
            sent.append(
                (retirement, await archive.write(snapshot.partition, retirement.run_id.encode(), retirement.archive))
            )
        except Exception as error:
            sent.append((retirement, error))
    records: list[tuple[bytes, bytes | None]] = []
    for retirement, acknowledgement in sent:
        try:
            if isinstance(acknowledgement, BaseException):
                raise acknowledgement
            offset = await acknowledgement
        except Exception as error:
            why = refusal(error)
            if why is None:
                raise
            log.error(
                "the broker refused the archive record of run %r (%d bytes): %r; the run stays in the changelog",
                retirement.run_id,
                len(retirement.archive),
                why,
            )
            continue
        records += retirement.records(snapshot.partition, offset)
    return records
