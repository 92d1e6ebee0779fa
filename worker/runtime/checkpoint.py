"""One events partition's checkpoint: what its events did, written in one Kafka transaction.

A `Checkpoint` goes through these stages, and only forward:
- GATHERING: the outputs of the events handled since the previous checkpoint are added to it
  (summaries and dead letters as each event makes them, progress as it falls due);
- SEALED: the processor's snapshot is taken (`worker.runtime.changes`): the changelog
  records of those events, and the closed runs it retires. What it writes is now fixed;
  later events gather in the next checkpoint;
- WRITING: in the broker, inside the partition's open transaction;
- COMMITTED: the transaction is committed: every record of it is durable and readable by
  consumers reading committed records, and the group's offset of the partition moved with it;
- APPLIED: its changelog records are in the local copy too, and its runs may leave the cache.
A checkpoint that fails while WRITING is ABORTED: none of its records is readable by a
committed reader, none reached the local copy, and its events are handled again.

**The order of writes** (`Checkpoint.write`, the one place it is written):
1. begin a transaction on the partition's producer (`worker.runtime.transactions`);
2. send the outputs, in the order the events made them;
3. send the archive record of each run the checkpoint retires, and wait for the broker's
   answers: the offset of each goes into its run's marker;
4. send the changelog records: the parts the events changed (a run back from its archive:
   every part, its header last), then for each retired run the marker at its header key and
   tombstones at its task keys, then the checkpoint record (the offset of the last event
   covered, and the events topic's id);
5. wait for the broker's answer to every record sent;
6. commit, with the offset after the last event covered as the group's offset of the
   events partition;
7. put the changelog records in the local copy, in one write with the checkpoint record's
   offset (`worker.runtime.store`), and tell the processor they are written.

**Why it is safe.** The transaction makes steps 2 to 6 one: after a crash, a kill or a
fencing at any step, either everything of the checkpoint is committed (its outputs, its
state, its offset) or nothing is, so an event's effects, its outputs and the position
that says it was read can never part. A worker taking the partition over starts a producer
under the partition's transactional id before it reads the changelog, which aborts a
transaction left open and fences its producer: a worker that stalled and woke up can
commit nothing more, and its writes can never land after the new owner's. The local copy
gets only what a commit returned for (7 after 6), so it is always a committed prefix of the
changelog; a restart reads the changelog from its offset on. A marker names its archive
record by offset, so the record is sent and answered first (3 before 4); both commit
together. Retiring a run touches only what the local copy holds of it, i.e. committed bytes.

**Refusals.** A record the broker refuses for good (the closed list of
`worker.runtime.refusals`: too large, invalid, against a policy, not authorised for its
output topic) is known at step 5, or at once if the producer's own size check refuses it.
Every answer of what was sent is waited for before anything is decided: when one record is
refused, the others of its transaction fail with it (out of sequence, or the transaction's
own failure), and only the refusal says which record is at fault. The broker refuses a
batch whole, and the producer batches a partition's records together, so a refusal in an
answer may be a batch-mate's fault: the checkpoint is then written again with each record in
a batch of its own, answered before the next is sent (`singly`), and only what is refused
then (or at once, by the producer's own check) is the record's own. The transaction is
aborted before any commit, and written again with a new producer (aiokafka's idempotent
producer cannot write to that partition after a refusal): an output is replaced by its dead
letter (`output-refused`), a dead letter refused in turn is dropped (both counted and
logged), a retirement whose archive record is refused is left out (the run stays in the
changelog), and a changelog record refused raises `StateRefused`, so that its run alone is
parked and the partition read again without it. Every other failure raises as it is, the
first one met (nothing more is sent after it): nothing of the checkpoint committed, or its
outcome is not known, and the engine renews the partition's producer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Literal

from projections.storage import ArchiveRef
from worker.runtime.changes import Snapshot
from worker.runtime.keys import run_of_key
from worker.runtime.outputs import Publish, Source, refused_output
from worker.runtime.processor import Counts
from worker.runtime.refusals import refusal
from worker.runtime.store import Change
from worker.runtime.transactions import Stream, Transactions

log = logging.getLogger("evalstream.worker")


class Stage(Enum):
    GATHERING = "gathering"
    SEALED = "sealed"
    WRITING = "writing"
    COMMITTED = "committed"
    APPLIED = "applied"
    ABORTED = "aborted"


class StateRefused(Exception):
    """The broker refused a changelog record of these runs: their state cannot be stored."""

    def __init__(self, runs: dict[str, str]) -> None:
        super().__init__("; ".join(f"run {run!r}: {why}" for run, why in runs.items()))
        self.runs = runs


@dataclass
class Refused(Exception):
    """Records the broker refused for good, by what they were; the checkpoint, amended,
    is written again with a new producer."""

    outputs: dict[int, Exception] = field(default_factory=dict)
    """Index in the checkpoint's outputs -> the refusal."""
    archives: dict[str, Exception] = field(default_factory=dict)
    """Run id of a retirement -> the refusal of its archive record."""
    state: dict[str, str] = field(default_factory=dict)
    """Run id ("" for the checkpoint record) -> why a changelog record of it was refused."""
    unsure: bool = False
    """A refusal came in the answer to a batch: which of its records the broker refuses is
    not known (a batch is refused whole), so the checkpoint is written again a record a
    batch (`Checkpoint.singly`) before anything is dead-lettered or parked."""

    def __bool__(self) -> bool:
        return bool(self.outputs or self.archives or self.state or self.unsure)


Applied = Callable[[Snapshot, list[Change], int, dict[str, ArchiveRef]], None]
"""Told a committed checkpoint's snapshot, its changelog records in order, the checkpoint
record's changelog offset and the archive record of each run it retired: puts the records in
the local copy and tells the processor."""


class Checkpoint:
    def __init__(self, partition: int, topic: str) -> None:
        self.partition = partition
        self.topic = topic
        self.stage = Stage.GATHERING
        self.outputs: list[Publish] = []
        self.output_bytes = 0
        self.progress = 0
        """Progress events among its outputs: a checkpoint holding one is due at once."""
        self.snapshot: Snapshot | None = None
        self.singly = False
        """Each record in a batch of its own, answered before the next is sent (after a
        refused batch: to find the record the broker refuses)."""
        self.last = Source(topic, partition, -1)
        """The last event its partition had handled when it was sealed: the source named by
        the dead letter of a refused output that came from no one event (progress)."""

    def add(self, items: list[Publish]) -> None:
        assert self.stage is Stage.GATHERING
        self.outputs += items
        self.output_bytes += sum(len(item.value) for item in items)
        self.progress += sum(item.stream == "progress" for item in items)

    @property
    def empty(self) -> bool:
        return not self.outputs and self.snapshot is None

    def seal(self, snapshot: Snapshot | None, last_offset: int) -> None:
        self.snapshot = snapshot
        self.last = Source(self.topic, self.partition, last_offset)
        self.stage = Stage.SEALED

    async def write(self, producer: Transactions, *, owner: Callable[[], bool], applied: Applied) -> None:
        """Write the checkpoint in one transaction, in the order of this module's docstring;
        then, if the partition is still `owner()`'s, apply it. Raises `Refused` (nothing
        committed; `amend` and write again with a new producer), `StateRefused`, or what
        failed (nothing committed, or not known: read the partition again)."""
        self.stage = Stage.WRITING
        try:
            changes, at, retired = await self._written(producer)
        except BaseException:
            self.stage = Stage.ABORTED
            await producer.abort()
            raise
        self.stage = Stage.COMMITTED
        if owner():
            if self.snapshot is not None:
                applied(self.snapshot, changes, at, retired)
            self.stage = Stage.APPLIED

    async def _written(self, producer: Transactions) -> tuple[list[Change], int, dict[str, ArchiveRef]]:
        answers = _Answers(producer, alone=self.singly)
        await producer.begin()
        for index, item in enumerate(self.outputs):
            slot: Slot = ("output", index)
            acknowledgement = await answers.send(item.stream, slot, producer.output(item), keep=not self.singly)
            if acknowledgement is not None and self.singly:
                await answers.answer(item.stream, slot, acknowledgement)
            if answers.failed is not None:
                break
        retired: dict[str, ArchiveRef] = {}
        snapshot = self.snapshot
        if snapshot is not None and answers.failed is None:
            retired = await self._archived(producer, snapshot, answers)
        changes: list[Change] = []
        at = -1
        if snapshot is not None and answers.failed is None and not answers.refused:
            markers = [
                change
                for item in snapshot.retirements
                if item.run_id in retired
                for change in item.records(retired[item.run_id])
            ]
            changes = [*snapshot.records, *markers, snapshot.checkpoint]
            for key, value in changes:
                at = max(at, await self._changelog(answers, run_of_key(key), key, value))
                if answers.failed is not None:
                    break
        at = max([at, *await answers.answered()])
        if answers.refused.unsure:
            self.singly = True
        if answers.refused:
            # The producer may not write a partition after a refusal of it: a new one writes
            # the checkpoint again, amended. Whatever else failed beside it is tried again so.
            raise answers.refused
        if answers.failed is not None:
            raise answers.failed
        await producer.commit(snapshot.offset + 1 if snapshot is not None else None)
        return changes, at, retired

    async def _changelog(self, answers: _Answers, run_id: str | None, key: bytes, value: bytes | None) -> int:
        """Step 4 for one changelog record: sent, and alone in its batch (`singly`) answered
        at once (its offset; else -1). A refusal known at once is its run's (`StateRefused`)."""
        slot: Slot = ("state", run_id or "")
        send = answers.producer.send("changelog", key, value, partition=self.partition)
        acknowledgement = await answers.send("changelog", slot, send, keep=not self.singly)
        offset = None
        if acknowledgement is not None and self.singly:
            offset = await answers.answer("changelog", slot, acknowledgement)
        why = answers.refused.state.get(run_id or "")
        if why is not None:
            if run_id is None:
                raise RuntimeError(f"the broker refused a checkpoint record: {why}")
            raise StateRefused({run_id: why})
        return -1 if offset is None else offset

    async def _archived(self, producer: Transactions, snapshot: Snapshot, answers: _Answers) -> dict[str, ArchiveRef]:
        """Step 3: the retired runs' archive records, answered (each before the next is sent,
        `singly`): where each one the broker took is."""
        by_run = {retirement.run_id: retirement for retirement in snapshot.retirements}
        sent: list[tuple[str, Awaitable[int]]] = []
        refs: dict[str, ArchiveRef] = {}

        async def answered(run: str, acknowledgement: Awaitable[int]) -> None:
            offset = await answers.answer("archive", ("archive", run), acknowledgement)
            if offset is not None:
                refs[run] = by_run[run].ref(self.partition, offset)

        for run, retirement in by_run.items():
            send = producer.send("archive", run.encode(), retirement.archive, partition=self.partition)
            acknowledgement = await answers.send("archive", ("archive", run), send, keep=False)
            if answers.failed is not None:
                break
            if acknowledgement is None:
                continue
            if self.singly:
                await answered(run, acknowledgement)
            else:
                sent.append((run, acknowledgement))
        for run, acknowledgement in sent:
            await answered(run, acknowledgement)
        return refs

    def amend(self, refused: Refused, counts: Counts) -> None:
        """After `Refused`: each refused output replaced by its dead letter (a refused dead
        letter dropped), each refused retirement left out; all counted and logged once. What a
        refused batch held is sought a record at a time at the next write (`singly`)."""
        assert self.stage is Stage.ABORTED
        if refused.unsure:
            log.warning(
                "the broker refused a batch of partition %d's checkpoint: writing it again a record a batch, to find "
                "the record it refuses",
                self.partition,
            )
        outputs = []
        for index, item in enumerate(self.outputs):
            error = refused.outputs.get(index)
            if error is None:
                outputs.append(item)
                continue
            counts.refuse(item.stream)
            run = (item.key or b"").decode(errors="replace")
            if item.stream == "deadletter":
                log.error("the broker refused a dead letter of run %r: %r; it is lost", run, error)
                continue
            log.error(
                "the broker refused the %s of run %r (%d bytes): %r; dead-lettered as output-refused, "
                "partition %d goes on",
                item.stream,
                run,
                len(item.value),
                error,
                self.partition,
            )
            counts.dead_letter("output-refused")
            outputs.append(refused_output(item, repr(error), item.source or self.last))
        self.outputs = outputs
        if refused.archives and self.snapshot is not None:
            for run_id, error in refused.archives.items():
                log.error(
                    "the broker refused the archive record of run %r: %r; the run stays in the changelog", run_id, error
                )
            kept = tuple(item for item in self.snapshot.retirements if item.run_id not in refused.archives)
            self.snapshot = replace(self.snapshot, retirements=kept)
        self.stage = Stage.SEALED


Slot = tuple[Literal["output", "archive", "state"], int | str]
"""What a record sent is: ("output", its index in the checkpoint), ("archive", its run id) or
("state", its run id; "" for the checkpoint record)."""


class _Answers:
    """One write's sends and the broker's answers, sorted as they come
    (`worker.runtime.refusals`): a refusal is its record's, set aside in `refused`; the
    first other error is `failed`, after which nothing more is sent. What was sent is
    answered either way (`answered`): a refusal may be what made the rest fail."""

    def __init__(self, producer: Transactions, *, alone: bool) -> None:
        """`alone`: each record is answered before the next is sent, so an answer's refusal
        is its record's; else it may be a batch-mate's (`Refused.unsure`)."""
        self.producer = producer
        self.alone = alone
        self.refused = Refused()
        self.failed: Exception | None = None
        self._kept: list[tuple[Stream, Slot, Awaitable[int]]] = []

    async def send(
        self, stream: Stream, slot: Slot, send: Awaitable[Awaitable[int]], *, keep: bool = True
    ) -> Awaitable[int] | None:
        """Make `send`: its acknowledgement (`keep`: also answered by `answered`), or None
        if it raised at once (sorted)."""
        try:
            acknowledgement = await send
        except Exception as error:
            self._sort(stream, slot, error, answered=False)
            return None
        if keep:
            self._kept.append((stream, slot, acknowledgement))
        return acknowledgement

    async def answer(self, stream: Stream, slot: Slot, acknowledgement: Awaitable[int]) -> int | None:
        """The record's offset, or None if it failed (sorted)."""
        try:
            return await acknowledgement
        except Exception as error:
            self._sort(stream, slot, error, answered=True)
            return None

    async def answered(self) -> list[int]:
        """Every kept acknowledgement answered: the offsets of the changelog records taken
        (an output's offset is in another topic)."""
        offsets = [
            (stream, await self.answer(stream, slot, acknowledgement)) for stream, slot, acknowledgement in self._kept
        ]
        return [offset for stream, offset in offsets if stream == "changelog" and offset is not None]

    def _sort(self, stream: Stream, slot: Slot, error: Exception, *, answered: bool) -> None:
        # The changelog's and the archive's authorisation is the worker's, never a record's.
        why = refusal(error, None if stream in ("changelog", "archive") else self.producer.topic(stream))
        if why is None:
            self.failed = self.failed or error
            return
        if answered and not self.alone:
            self.refused.unsure = True  # the broker refuses a batch whole: whose fault is not known
            return
        kind, where = slot
        if kind == "output":
            self.refused.outputs[int(where)] = why
        elif kind == "archive":
            self.refused.archives[str(where)] = why
        else:
            self.refused.state[str(where)] = repr(why)
