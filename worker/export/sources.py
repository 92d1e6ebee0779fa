"""Where an exporter reads summaries: the summaries topic in a consumer group of its own, or a
file of summaries as `evalstream replay` writes it.

Both hand out batches of `Exported` and a `commit` to call once a batch is written. From the
topic: committed records only (`read_committed`), from the group's committed offsets, and the
commit moves them past every record of the batch; without `follow`, up to the end of the
topic as it was when reading began. From a file: nothing to commit (running it again writes
nothing new: the sinks are idempotent); `run.progress` lines are passed over, and a line that
is not an output record is named on `err` and skipped.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import BinaryIO, TextIO

from aiokafka.errors import CommitFailedError
from pydantic import ValidationError

from events.clients.subscriber import AsyncSummarySubscriber
from events.codec import decode_output, output_problem
from events.outputs import RunSummary
from worker.export.sink import Exported

BATCH = 200
"""Summaries a batch holds at most: what a commit covers."""


@dataclass
class Counts:
    """What a source has read so far, for the progress lines."""

    read: int = 0
    skipped: int = 0
    """Records or lines that were not summaries a sink could take (each named as it was met)."""
    total: int | None = None
    """Records (or bytes of a file) to read in all, when known."""
    done: int = 0
    """Of `total`."""


@dataclass
class TopicSource:
    subscriber: AsyncSummarySubscriber
    follow: bool
    err: TextIO
    counts: Counts = field(default_factory=Counts)

    async def batches(self) -> AsyncIterator[list[Exported]]:
        async for batch in self.subscriber.batches(follow=self.follow, most=BATCH):
            self.counts.read += len(batch)
            self.counts.skipped = self.subscriber.invalid
            yield [Exported(each.record, each.raw, each.timestamp / 1000) for each in batch]

    async def commit(self) -> None:
        try:
            await self.subscriber.commit()
        except CommitFailedError:
            print(
                f"note: the group moved partitions of {self.subscriber.topic} to another member before this one "
                "committed; their records will be written again there (nothing is doubled)",
                file=self.err,
            )


@dataclass
class FileSource:
    stream: BinaryIO
    name: str
    err: TextIO
    counts: Counts = field(default_factory=Counts)

    async def batches(self) -> AsyncIterator[list[Exported]]:
        published = _modified(self.stream)
        self.counts.total = _size(self.stream)
        batch: list[Exported] = []
        for number, line in enumerate(self.stream, 1):
            self.counts.done += len(line)
            if not line.strip():
                continue
            try:
                record = decode_output(line)
            except ValidationError as error:
                self.counts.skipped += 1
                print(
                    f"{self.name} line {number}: not a run.summary record, skipped: {output_problem(error)}",
                    file=self.err,
                )
                continue
            if not isinstance(record, RunSummary):
                continue
            self.counts.read += 1
            batch.append(Exported(record, line.rstrip(b"\r\n"), published))
            if len(batch) >= BATCH:
                yield batch
                batch = []
        if batch:
            yield batch

    async def commit(self) -> None:
        """Nothing: a file has no offsets."""


def _modified(stream: BinaryIO) -> float:
    """The file's modification time: when `replay` wrote its summaries (stdin: now)."""
    try:
        return os.fstat(stream.fileno()).st_mtime
    except (OSError, ValueError):
        return time.time()


def _size(stream: BinaryIO) -> int | None:
    try:
        size = os.fstat(stream.fileno()).st_size
    except (OSError, ValueError):
        return None
    return size or None
