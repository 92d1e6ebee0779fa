"""A run's state as bytes, in parts, so that a store writes only what an event changed.

Every event changes exactly one part, and that part holds the event's fingerprint with
its effects, so a store that writes one record per event is consistent after any crash:
an event is in the state entirely or not at all.
- one record per task: its trials, score columns, counters, failed trials and the
  fingerprints of its events; written by each event that names the task, O(the task);
- the run header: the applied run.started (declarations are rebuilt from it and keep it), the close,
  and the fingerprints of those run-level events; written by run.started and run.closed.
Everything else (the event count, keys per task, pass@k tallies, the redelivery index) is
derived on restore (`run.rederive`), by the same code that maintains it live; trial and
score counts are always summed from the tasks.

Both folds store through these functions: a header is written of its parts (`StoredHeader`,
which `header_of` gives of a Python run and `projections.native_store.header_of` of a native
one), a native task's record natively (`NativeRun.task_record`, these bytes), and a restore
reads and checks the parts (`stored_run`, `archived_run`: versions, upgrades, errors) before
either fold's run is made of them (`run_of`; `projections.native_store.restored`).

Format: orjson objects, version field "v" (2 added the log positions of trial and run-level
events; 3 the archive; 4 a task's metrics as their packed records, `projections.packed.records`,
where 3 had one array per field; 5 the events topic's id in the checkpoint record); arrays
and records are base64 of their bytes in little-endian order.

**The archive.** A closed run whose parts are durable is retired out of the hot store: its
whole stored form (header and tasks, these same encodings, as stored) goes into one archive
record (`archive_to_bytes`: zlib-compressed JSON), and its header key then holds a marker
(`marker_to_bytes`: where that record is, and its digest) in place of the header, its task
keys nothing. A late event restores the run from the record (`restore_archived`), which is
checked against the marker's digest first, and writes back only what it changed: the task
it names, beside the marker, and the marker again, now holding the run's header but its
run.started (the declarations, which no late event but a first run.started changes; one
that does writes the whole run back). A restore reads the record and lays the marker's
header and the task records beside it over it. The worker writes and reads them in that
order (`worker.runtime.checkpoint`); this module only encodes.

Versions. A part of an older version than `VERSION` (down to `OLDEST`) is read through
`UPGRADES`, one step per version, as it is read: the run is then written back in the new
form with its next change, and nothing stored is ever refused for being old. A part of a
newer version than this code knows raises `NewerStore`, which stops the worker (going on
would fold events into a state it cannot read, or dead-letter them). The checkpoint record
carries the version too (`checkpoint_to_bytes`), so that a worker meets a newer store when
its partitions are assigned, before it consumes, and stops there: in a rolling upgrade an
old worker given a partition the new one has written stops instead of folding it, and the
group moves the partition on to a new worker. A version bump adds its step to `UPGRADES`;
`tests/worker/runtime/test_storage_versions.py` restores a store written by version 2's code
(`tests/fixtures/storage/`) with every later version. Version 3's parts are version 2's
(the step only renumbers them); what it adds is the marker and the archive, which a worker
of version 2 would take for a run that never was: its checkpoint records (`{"v": 3, ...}`)
stop such a worker before it reads any. Version 4 stores a metric's records as the fold
holds them (`MetricColumns.records_bytes`): a task part is written at every checkpoint that
covers a change of it, and gathering each field into an array of its own cost ~30 us a
task, most of a worker's checkpoint on many small runs. Version 5's parts are version 4's;
its changelog is written in Kafka transactions, which a worker of version 4 (reading
uncommitted records) would fold aborted writes from, and its checkpoint records name the
events topic's id: version 4's workers refuse them at assignment.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple

import orjson

from events.codec import DecodeError, decode
from events.models import RunStarted
from projections.fold.declarations import Declarations, started_wire
from projections.fold.run import RunState, rederive
from projections.fold.task import TaskState
from projections.packed.fingerprints import PAIR
from projections.packed.positions import POSITION
from projections.packed.records import MetricColumns
from projections.packed.trial_ids import joined, listed

VERSION: Final = 5
"""The version this code writes."""
OLDEST: Final = 2
"""The oldest version it reads (version 1 had no log positions, which revisions need)."""


class NewerStore(ValueError):
    """The store was written by a newer version of evalstream than this one."""

    def __init__(self, stored: int) -> None:
        super().__init__(
            f"the worker's state is stored in version {stored}, and this evalstream reads versions "
            f"{OLDEST} to {VERSION}: a newer evalstream wrote it; run that version (or newer) instead"
        )
        self.stored = stored


_HEADER_FIELDS: Final = ("started_event_id", "closed_reason", "closed_position", "first_at", "last_at")
_TASK_FIELDS: Final = ("first_score", "touched", "trials_completed", "trials_failed", "first_at", "last_at")
_TASK_DERIVED: Final = frozenset(("touched", "trials_completed", "trials_failed"))
"""Stored, but not read back: a task derives them from its fingerprints, trial positions and
failures."""


def _text(data: bytes) -> str:
    """Base64, as `base64.b64encode` spells it (without its Python wrapper's cost)."""
    return binascii.b2a_base64(data, newline=False).decode()


def _items(text: str, size: int, what: str) -> bytes:
    """Stored items of `size` bytes each, little-endian, kept as the bytes they are."""
    data = base64.b64decode(text)
    if len(data) % size:
        raise ValueError(
            f"stored {what} are damaged ({len(data)} bytes, not whole items of {size}); "
            "wipe the store and replay the topic"
        )
    return data


def _unpack(typecode: str, text: str) -> array[Any]:
    values = array(typecode, base64.b64decode(text))
    if sys.byteorder == "big":
        values.byteswap()
    return values


class StoredHeader(NamedTuple):
    """A run header's parts, from either fold's run (`header_of`; the native fold's:
    `projections.native_store.header_of`), or as a restore read them."""

    started_event_id: str | None
    closed_reason: str | None
    closed_position: int
    first_at: float | None
    last_at: float | None
    run_events: bytes
    run_positions: bytes
    started: bytes | None
    """The run.started as the declarations keep it (`Declarations.started`: compressed when
    large, decompressed only by a write of the whole header); None: none applied."""


def header_of(run: RunState) -> StoredHeader:
    """The header parts of the Python fold's `run`."""
    return StoredHeader(
        run.started_event_id,
        run.closed_reason,
        run.closed_position,
        run.first_at,
        run.last_at,
        run.run_events,
        run.run_positions,
        run.declarations.started if run.declarations is not None else None,
    )


def header_to_bytes(header: StoredHeader) -> bytes:
    stored = _header_fields(header)
    stored["started"] = started_wire(header.started).decode() if header.started is not None else None
    return orjson.dumps(stored)


def _header_fields(header: StoredHeader) -> dict[str, Any]:
    """The header but its run.started (the declarations: O(tasks) bytes)."""
    stored: dict[str, Any] = {"v": VERSION, **{name: getattr(header, name) for name in _HEADER_FIELDS}}
    stored["run_events"] = _text(header.run_events)
    stored["run_positions"] = _text(header.run_positions)
    return stored


def task_to_bytes(task: TaskState) -> bytes:
    return orjson.dumps(
        {
            "v": VERSION,
            **{name: getattr(task, name) for name in _TASK_FIELDS},
            "trials": listed(task.trials),
            "metrics": {metric: _metric_part(columns) for metric, columns in task.metrics()},
            "failed": task.failed_trials,
            "events": _text(task.events),
            "trial_positions": _text(task.trial_positions),
        }
    )


def _metric_part(columns: MetricColumns) -> dict[str, Any]:
    records, spilled = columns.records_bytes()
    return {"names": columns.names, "records": _text(records), "spilled": None if spilled is None else _text(spilled)}


def _metric_part_v3(stored: dict[str, Any]) -> dict[str, Any]:
    """Version 3's metric (an array per field) as version 4 stores it."""
    columns = MetricColumns.of(
        trials=_unpack("i", stored["trials"]),
        statuses=base64.b64decode(stored["statuses"]),
        seqs=_unpack("q", stored["seqs"]),
        outputs={
            output: (_unpack("i", column["rows"]), base64.b64decode(column["kinds"]), _unpack("d", column["values"]))
            for output, column in stored["outputs"].items()
        },
    )
    return _metric_part(columns)


def _upgrade_3(stored: dict[str, Any]) -> dict[str, Any]:
    """Version 3 to 4: a task's metrics as their records; a header is as it was."""
    if "metrics" not in stored:
        return {**stored, "v": 4}
    return {**stored, "v": 4, "metrics": {metric: _metric_part_v3(part) for metric, part in stored["metrics"].items()}}


UPGRADES: Final[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    2: lambda stored: {**stored, "v": 3},
    3: _upgrade_3,
    4: lambda stored: {**stored, "v": 5},
}
"""Version n -> the step that turns a stored part (header or task) of version n into n + 1."""


def task_from_bytes(task_id: str, data: bytes) -> TaskState:
    """A task as stored (its keys are decided again by `restore`)."""
    return _task_of(task_id, orjson.loads(data))


def _task_of(task_id: str, parsed: Any) -> TaskState:
    stored = _checked(parsed, f"task {task_id!r}")
    trials = joined(stored["trials"])
    return TaskState(
        task_id,
        **{name: stored[name] for name in _TASK_FIELDS if name not in _TASK_DERIVED},
        trials=trials,
        metrics={
            metric: _columns_of(part, f"task {task_id!r}, metric {metric!r}")
            for metric, part in stored["metrics"].items()
        },
        failed_trials=[tuple(entry) for entry in stored["failed"]] if stored["failed"] else None,
        events=_items(stored["events"], PAIR.size, f"task {task_id!r} events"),
        trial_positions=_items(stored["trial_positions"], POSITION.size, f"task {task_id!r} trial positions"),
    )


def _columns_of(part: dict[str, Any], what: str) -> MetricColumns:
    spilled = part["spilled"]
    try:
        return MetricColumns.of_bytes(
            tuple(part["names"]),
            base64.b64decode(part["records"]),
            None if spilled is None else base64.b64decode(spilled),
        )
    except ValueError as error:
        raise ValueError(f"stored {what} is damaged ({error}); wipe the store and replay the topic") from None


class StoredRun(NamedTuple):
    """A run's stored parts, read and checked (`stored_run`, `archived_run`): what either
    fold's run is made of (`run_of`; the native fold's: `projections.native_store.restored`)."""

    run_id: str
    header: StoredHeader | None
    """None: no run-level event was applied."""
    declarations: Declarations | None
    """Read from the header's run.started, which they keep (None: none applied)."""
    tasks: dict[str, TaskState]
    """The stored tasks, in the store's order: a declared task nothing arrived for has none,
    and the run makes it."""


def restore(run_id: str, header: bytes | None, tasks: Iterable[TaskState]) -> RunState:
    """The run as its stored parts say (`header` None: no run-level event was applied)."""
    return run_of(stored_run(run_id, header, tasks))


def stored_run(run_id: str, header: bytes | None, tasks: Iterable[TaskState]) -> StoredRun:
    """`restore`'s parts, read and checked."""
    if marker_of(header) is not None:
        raise ValueError(f"run {run_id!r} is archived: restore it from its archive record (`restore_archived`)")
    return _parts(run_id, orjson.loads(header) if header is not None else None, tasks)


def _parts(run_id: str, parsed: Any, tasks: Iterable[TaskState]) -> StoredRun:
    header, declarations = None, None
    if parsed is not None:
        stored = _checked(parsed, f"run {run_id!r} header")
        if stored["started"] is not None:
            wire = stored["started"].encode()
            try:
                started = decode(wire)
            except DecodeError as error:
                raise ValueError(
                    f"stored run.started of run {run_id!r} is not a valid event ({error}); wipe the store and replay"
                ) from None
            if not isinstance(started, RunStarted):
                raise ValueError(f"stored run.started of run {run_id!r} is a {started.type}; wipe the store and replay")
            declarations = Declarations.of(started, wire)
        header = StoredHeader(
            **{name: stored[name] for name in _HEADER_FIELDS},
            run_events=_items(stored["run_events"], PAIR.size, f"run {run_id!r} header events"),
            run_positions=_items(stored["run_positions"], POSITION.size, f"run {run_id!r} header positions"),
            started=declarations.started if declarations is not None else None,
        )
    return StoredRun(run_id, header, declarations, {task.task_id: task for task in tasks})


def run_of(stored: StoredRun) -> RunState:
    """The Python fold's run of stored parts: the rest derived from them (`rederive`)."""
    run = RunState(stored.run_id)
    if stored.header is not None:
        for name in (*_HEADER_FIELDS, "run_events", "run_positions"):
            setattr(run, name, getattr(stored.header, name))
    run.declarations = stored.declarations
    run.tasks = dict(stored.tasks)
    if run.declarations is not None:
        for task_id in run.declarations.tasks:  # a declared task nothing arrived for has no record
            run.tasks.setdefault(task_id, TaskState(task_id))
    rederive(run)
    return run


class ArchiveRef(NamedTuple):
    """Where a retired run's archive record is (partition and offset of the archive topic),
    and the digest its value must have."""

    partition: int
    offset: int
    digest: str


class ArchiveMismatch(ValueError):
    """The record found where a marker points is not the run's archive."""


_MARKER_START: Final = b'{"archived":'
"""How every marker begins (its first key): a header is told from a marker by its first
bytes, without parsing a header that may hold a large run.started."""


def digest_of(archive: bytes) -> str:
    return hashlib.blake2b(archive, digest_size=16).hexdigest()


def archive_to_bytes(header: bytes, tasks: Iterable[tuple[str, bytes]]) -> bytes:
    """A run's archive record: its stored header and task parts (task id, bytes), as stored."""
    document = {
        "v": VERSION,
        "header": orjson.Fragment(header),
        "tasks": [[task_id, orjson.Fragment(blob)] for task_id, blob in tasks],
    }
    return zlib.compress(orjson.dumps(document), 6)


def marker_to_bytes(ref: ArchiveRef, header: StoredHeader | None = None) -> bytes:
    """What a retired run's header key holds instead of its header; with `header` (a late
    event changed the run), also the header but the run.started, which the archive record keeps."""
    marker: dict[str, Any] = {"archived": ref._asdict(), "v": VERSION}
    if header is not None:
        marker["header"] = _header_fields(header)
    return orjson.dumps(marker)


def marker_of(header: bytes | None) -> ArchiveRef | None:
    """The archive record a stored header key points to; None: a header (or nothing)."""
    if header is None or not header.startswith(_MARKER_START):
        return None
    stored = orjson.loads(header)
    if stored["v"] > VERSION:
        raise NewerStore(stored["v"])
    return ArchiveRef(**stored["archived"])


def restore_archived(
    run_id: str, ref: ArchiveRef, archive: bytes, marker: bytes | None = None, residue: Iterable[TaskState] = ()
) -> RunState:
    """The run as its archive record says, then as late events changed it since: the
    header its `marker` holds (but the run.started) and the task records written beside the
    marker (`residue`). `ArchiveMismatch` if the record is not the one the marker names (its
    digest differs)."""
    return run_of(archived_run(run_id, ref, archive, marker, residue))


def archived_run(
    run_id: str, ref: ArchiveRef, archive: bytes, marker: bytes | None = None, residue: Iterable[TaskState] = ()
) -> StoredRun:
    """`restore_archived`'s parts, read and checked."""
    if digest_of(archive) != ref.digest:
        raise ArchiveMismatch(
            f"the archive record of run {run_id!r} at partition {ref.partition}, offset {ref.offset} is not the "
            "one its marker names (its digest differs); the archive topic was changed: wipe the store and replay"
        )
    document = orjson.loads(zlib.decompress(archive))
    if document["v"] > VERSION:
        raise NewerStore(document["v"])
    tasks = {task_id: _task_of(task_id, stored) for task_id, stored in document["tasks"]}
    tasks.update((task.task_id, task) for task in residue)
    header = document["header"]
    late = orjson.loads(marker).get("header") if marker is not None else None
    if late is not None:
        header = {**_checked(late, f"run {run_id!r} marker"), "started": _checked(header, "run header")["started"]}
    return _parts(run_id, header, tasks.values())


class StoredCheckpoint(NamedTuple):
    """A partition's checkpoint record, read."""

    offset: int
    """The offset of the last event it covers."""
    version: int
    """The storage version that wrote it."""
    events_topic: str | None
    """The id of the events topic those offsets are of (None: not recorded, before version 5)."""


def checkpoint_to_bytes(offset: int, events_topic: str | None = None) -> bytes:
    """A partition's checkpoint record: {"v": version, "offset": the offset of the last
    event it covers, "events": the events topic's id}. A worker of version 2 or later refuses
    it by its version (and one before cannot parse it), so that it stops."""
    return orjson.dumps({"v": VERSION, "offset": offset, "events": events_topic})


def closed_header(header: bytes) -> bool:
    """Whether a stored header key holds the header of a closed run (not a marker)."""
    if marker_of(header) is not None:
        return False
    return _checked(orjson.loads(header), "run header")["closed_reason"] is not None


def checkpoint_from_bytes(data: bytes) -> StoredCheckpoint:
    """A checkpoint record (version 2's form: the offset's ASCII digits); `NewerStore` if a
    newer version wrote it."""
    if data.isdigit():
        return StoredCheckpoint(int(data), 2, None)
    stored = orjson.loads(data)
    version = stored.get("v") if isinstance(stored, dict) else None
    if isinstance(version, int) and version > VERSION:
        raise NewerStore(version)
    offset = stored.get("offset") if isinstance(stored, dict) else None
    if not isinstance(offset, int) or not isinstance(version, int):
        raise ValueError(f"stored checkpoint {data!r} names no offset; wipe the store and replay the topic")
    events = stored.get("events")
    return StoredCheckpoint(offset, version, events if isinstance(events, str) else None)


def _checked(stored: Any, what: str) -> dict[str, Any]:
    """`stored` in this version's form, upgraded step by step from an older one."""
    version = stored.get("v") if isinstance(stored, dict) else None
    if not isinstance(version, int) or version < OLDEST:
        raise ValueError(
            f"stored {what} is not state of versions {OLDEST} to {VERSION}; wipe the store and replay the topic"
        )
    if version > VERSION:
        raise NewerStore(version)
    upgraded: dict[str, Any] = stored
    while version < VERSION:
        upgraded = UPGRADES[version](upgraded)
        version += 1
    return upgraded
