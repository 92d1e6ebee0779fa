"""Bringing one partition's local copy up to its changelog's committed end.

A partition's copy (`worker.runtime.store`) is trusted only when it is provably a prefix of
this changelog: its recorded identity (cluster id, changelog topic id, app id) must be the
changelog's, and its offset must fall inside the changelog (at or past its start, before its
end). A copy that fails either (left by another cluster, app id or incarnation of the
topic, or ahead of a changelog that lost records) is wiped and the partition read from the
changelog's start. Otherwise only the records after its offset are read: restart cost
follows the writes since the copy was last written, not the runs ever stored.

The changelog is read as a committed reader reads it: an aborted transaction's records are
skipped, and the end is the last stable offset. It is read only after the partition's
producer has started (`worker.runtime.ownership`), which aborted any transaction a previous
owner left open: what is read is final.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from worker.runtime.store import Change, Identity, PartitionStore

log = logging.getLogger("evalstream.worker")

FETCH_BYTES = 16 * 2**20


@dataclass(frozen=True, slots=True)
class Restored:
    records: int
    """Changelog records read into the copy (0: it was up to date)."""
    wiped: str | None
    """Why the copy was wiped first (None: it was kept)."""


def unfit(store: PartitionStore, identity: Identity, start: int, end: int) -> str | None:
    """Why the copy is not a prefix of this changelog partition (None: it is). `start`, `end`:
    the partition's first offset and its last stable offset."""
    held = store.identity
    offset = store.offset
    if held is None and offset is None:
        return None  # empty
    if held != identity:
        return f"it was made from another changelog ({held} is not {identity})"
    assert offset is not None
    if offset >= end:
        return f"it holds the changelog up to offset {offset}, past the changelog's end ({end})"
    if offset + 1 < start:
        return f"the changelog's records after its offset {offset} were deleted (the changelog starts at {start})"
    return None


async def restore(
    store: PartitionStore, consumer: AIOKafkaConsumer, changelog: TopicPartition, identity: Identity
) -> tuple[PartitionStore, Restored]:
    """Bring `store` up to the end of `changelog` (read by `consumer`, started, in no group,
    reading committed records); returns the copy (a new one if it was wiped) and what was
    done."""
    consumer.assign([changelog])
    start = (await consumer.beginning_offsets([changelog]))[changelog]
    end = (await consumer.end_offsets([changelog]))[changelog]
    why = unfit(store, identity, start, end)
    if why is not None:
        log.warning("the local copy of %s[%d] is wiped: %s", changelog.topic, changelog.partition, why)
        store = store.wipe()
    offset = store.offset
    read = 0
    if offset is None or offset + 1 < end:
        consumer.seek(changelog, offset + 1 if offset is not None else start)
        while await consumer.position(changelog) < end:
            # Short: past the last record there may be only transaction markers, which move the
            # position on but never arrive as records.
            batch = (await consumer.getmany(changelog, timeout_ms=100)).get(changelog, [])
            if batch:
                changes: list[Change] = [(record.key, record.value) for record in batch]
                store.apply(changes, batch[-1].offset, identity)
                read += len(batch)
    # Past the last record read lie only transaction markers and aborted records.
    store.apply((), end - 1, identity)
    return store, Restored(read, why)
