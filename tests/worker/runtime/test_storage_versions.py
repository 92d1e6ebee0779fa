"""Upgrades: a store of an older storage version is read (never dead-lettered), one of a
newer version stops the worker before it consumes.

`tests/fixtures/storage/store-v2.jsonl` is a worker's store as storage version 2's code
wrote it (made by `tests/fixtures/storage/make_v2.py`, bytes committed): every later
version must restore it and go on to the summaries replay gives, byte for byte."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import orjson
import pytest

from events.codec import encode, encode_payload
from projections import storage
from projections.run import RunState
from projections.storage import NewerStore
from projections.summary import summary
from tests import builders
from tests.fixtures.storage.make_v2 import CHECKPOINTED, records
from tests.worker.runtime.engine_harness import Store
from worker.commands.replay import replay
from worker.runtime.keys import checkpoint_key, header_key, task_id_of, task_prefix
from worker.runtime.processor import Processor, Record

FIXTURE = Path(__file__).parents[2] / "fixtures" / "storage"


def fixture_store() -> Store:
    store = Store()
    for line in (FIXTURE / "store-v2.jsonl").read_bytes().splitlines():
        row = orjson.loads(line)
        store.partitions.setdefault(row["partition"], {})[base64.b64decode(row["key"])] = base64.b64decode(row["value"])
    return store


def log() -> list[bytes]:
    return (FIXTURE / "log.jsonl").read_bytes().splitlines()


def replayed(lines: list[bytes]) -> dict[str, bytes]:
    """Each run's last summary, as `evalstream replay` writes it."""
    out = io.BytesIO()
    replay(lines, out, io.StringIO())
    return {orjson.loads(line)["run_id"]: line for line in out.getvalue().splitlines()}


def resumed_from_fixture() -> tuple[dict[str, bytes], Store]:
    """A worker on the fixture's store: it resumes past the checkpoint, reads the rest of
    the log; each run's last summary it publishes, and its store after a checkpoint."""
    store = fixture_store()
    processor = Processor(store)
    assert processor.assign([0]) == {0: CHECKPOINTED}
    published = processor.handle(0, records(log())[CHECKPOINTED:], 0.0)
    snapshot = processor.snapshot(0)
    assert snapshot is not None
    for key, value in (*snapshot.records, snapshot.checkpoint):
        store.partitions[0][key] = value
    latest = {item.key.decode(): item.value for item in published if item.stream == "summary" and item.key}
    return latest, store


def test_the_version_2_store_restores_and_goes_on_as_replay_does() -> None:
    latest, _ = resumed_from_fixture()
    want = replayed(log())
    assert set(latest) == {"fixture-closed", "fixture-open"}  # the late event's revision, and the close
    assert latest == want
    assert orjson.loads(latest["fixture-closed"])["revision"] == 2


def test_this_version_writes_its_own_and_reads_version_2_through_the_upgrade() -> None:
    latest, store = resumed_from_fixture()
    assert latest == replayed(log())
    version = storage.VERSION
    assert orjson.loads(store.partitions[0][checkpoint_key(0)]) == {
        "v": version,
        "offset": len(log()) - 1,
        "events": None,
    }
    assert orjson.loads(store.partitions[0][header_key("fixture-open")])["v"] == version


def test_a_version_bump_reads_the_version_2_store_through_its_upgrades(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the next version does: it writes its own and upgrades older parts as read, step by step."""
    upgraded: list[int] = []
    later = storage.VERSION + 1

    def step(stored: dict[str, object]) -> dict[str, object]:
        upgraded.append(1)
        return {**stored, "v": later}

    monkeypatch.setattr(storage, "VERSION", later)
    monkeypatch.setitem(storage.UPGRADES, later - 1, step)
    latest, store = resumed_from_fixture()
    assert latest == replayed(log())
    assert upgraded, "the version 2 parts went through the upgrades"
    assert orjson.loads(store.partitions[0][checkpoint_key(0)]) == {
        "v": later,
        "offset": len(log()) - 1,
        "events": None,
    }
    assert orjson.loads(store.partitions[0][header_key("fixture-open")])["v"] == later


def test_a_store_of_a_newer_version_stops_the_worker_before_it_consumes() -> None:
    store = fixture_store()
    store.partitions[0][checkpoint_key(0)] = orjson.dumps({"v": storage.VERSION + 1, "offset": 63})
    processor = Processor(store)
    with pytest.raises(NewerStore) as refused:
        processor.assign([0])
    message = str(refused.value)
    assert f"version {storage.VERSION + 1}" in message
    assert f"versions {storage.OLDEST} to {storage.VERSION}" in message
    assert processor.refused is refused.value


@pytest.mark.parametrize("retire", [True, False])
def test_a_run_stored_by_a_newer_version_is_refused_not_dead_lettered(retire: bool) -> None:
    """Found at assignment (its header is read for closed runs to retire), or when its event
    comes: either way the worker stops, nothing is dead-lettered and no checkpoint is taken."""
    store = fixture_store()
    store.partitions[0][checkpoint_key(0)] = storage.checkpoint_to_bytes(CHECKPOINTED - 1)
    key = header_key("fixture-closed")
    store.partitions[0][key] = store.partitions[0][key].replace(b'"v":2', b'"v":%d' % (storage.VERSION + 1))
    processor = Processor(store, retire=retire)
    late = [
        Record(CHECKPOINTED, b"fixture-closed", encode(builders.trial("task-00000", "later", run_id="fixture-closed")))
    ]
    if retire:
        with pytest.raises(NewerStore):
            processor.assign([0])
    else:
        processor.assign([0])
        with pytest.raises(NewerStore):
            processor.handle(0, late, 0.0)
    assert processor.refused is not None
    assert processor.counts.dead_lettered == {}
    assert processor.snapshot(0) is None


def test_a_part_older_than_the_oldest_version_read_is_refused_with_the_fix() -> None:
    store = fixture_store()
    key = header_key("fixture-closed")
    with pytest.raises(ValueError, match="wipe the store and replay the topic"):
        storage.restore("fixture-closed", store.partitions[0][key].replace(b'"v":2', b'"v":1'), [])


def test_a_version_2_run_archived_as_stored_restores_as_its_parts_do_and_a_wrong_record_is_refused() -> None:
    store = fixture_store().partitions[0]
    header = store[header_key("fixture-closed")]
    parts = [
        (task_id_of(key), value)
        for key, value in sorted(store.items())
        if key.startswith(task_prefix("fixture-closed"))
    ]
    archive = storage.archive_to_bytes(header, parts)
    ref = storage.ArchiveRef(0, 7, storage.digest_of(archive))
    assert storage.marker_of(storage.marker_to_bytes(ref)) == ref
    assert storage.marker_of(header) is None
    hot = storage.restore("fixture-closed", header, [storage.task_from_bytes(task, blob) for task, blob in parts])
    archived = storage.restore_archived("fixture-closed", ref, archive)
    assert summary_bytes(archived) == summary_bytes(hot)
    with pytest.raises(storage.ArchiveMismatch, match="digest differs"):
        storage.restore_archived("fixture-closed", ref._replace(digest=storage.digest_of(b"another")), archive)


def summary_bytes(run: RunState) -> bytes:
    return encode_payload(summary(run))


def test_the_closed_runs_of_a_version_2_store_are_retired_once_assigned() -> None:
    store = fixture_store()
    processor = Processor(store)
    processor.assign([0])
    snapshot = processor.snapshot(0)
    assert snapshot is not None
    assert [retirement.run_id for retirement in snapshot.retirements] == ["fixture-closed"]
    assert snapshot.records == ()
    [retirement] = snapshot.retirements
    ref = storage.ArchiveRef(0, 0, storage.digest_of(retirement.archive))
    archived = storage.restore_archived("fixture-closed", ref, retirement.archive)
    parts = store.partitions[0]
    tasks = [storage.task_from_bytes(task_id_of(key), parts[key]) for key in retirement.task_keys]
    hot = storage.restore("fixture-closed", parts[header_key("fixture-closed")], tasks)
    assert summary_bytes(archived) == summary_bytes(hot)
    assert len(retirement.task_keys) == 3
