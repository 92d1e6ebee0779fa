"""The worker's per-message logic without Kafka: dead letters, and recovery from its store."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from events.codec import encode
from events.models import InputEvent
from tests import builders
from tests.strategies import run_logs
from worker.processor import Admission, Processor, Source

SOURCE = Source("events", 0, 7)


def published(
    processor: Processor,
    lines: list[bytes],
    first_offset: int = 0,
    flush_at: frozenset[int] = frozenset(),
    key: bytes = b"run",
) -> list[bytes]:
    """Summaries published for `lines`, read at offsets first_offset..; flushes after the
    events whose offsets are in `flush_at`."""
    out = []
    for offset, line in enumerate(lines, first_offset):
        out += [
            item.value for item in processor.handle(key, line, Source("events", 0, offset)) if item.stream == "summary"
        ]
        if offset in flush_at:
            processor.flush(0)
    return out


class WriteLog(dict[bytes, bytes]):
    """A store that remembers the order of its writes, to replay any prefix of them."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[bytes, bytes]] = []

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.writes.append((key, value))
        super().__setitem__(key, value)


@given(run_logs(), st.data())
def test_a_worker_restarted_on_what_its_store_kept_ends_with_the_same_summaries(
    log: list[InputEvent], data: st.DataObject
) -> None:
    """A crash after any event keeps any prefix of the writes (a flush cut short too); the
    restarted worker reads again from the checkpoint that prefix holds."""
    lines = [encode(event) for event in log]
    crashed_at = data.draw(st.integers(0, len(lines)))
    flush_at = data.draw(st.frozensets(st.integers(0, max(crashed_at - 1, 0))))
    written = WriteLog()
    before = published(Processor(store=written), lines[:crashed_at], flush_at=flush_at)
    kept = dict(written.writes[: data.draw(st.integers(0, len(written.writes)))])
    restarted = Processor(store=kept)
    resume = restarted.resume_offsets([0])[0]
    after = published(restarted, lines[resume:], first_offset=resume)
    reference = published(Processor(), lines)
    assert (before + after)[-1:] == reference[-1:]  # the latest summary, as a compacted topic keeps it
    assert set(before + after) == set(reference)  # no revision lost, none invented


def test_a_task_record_newer_than_the_checkpoint_keeps_undeclared_tasks_and_failures_in_log_order() -> None:
    """Found by the property above: a crash kept task a's record of a flush but neither b's
    nor the checkpoint. b's first score and failure come before a's in the log, and must
    still come first once b's events are read again after a's record."""
    events = [
        builders.trial("b", "b-1", status="failed"),
        builders.score("b", "b-1", "judge"),
        builders.trial("a", "a-1", status="failed"),
        builders.score("a", "a-1", "judge"),
        builders.closed(),
    ]
    lines = [encode(event) for event in events]
    written = WriteLog()
    published(Processor(store=written), lines[:4], flush_at=frozenset({3}))
    a_only = dict(write for write in written.writes if write[0] == b't["run","a"]')
    restarted = Processor(store=a_only)
    assert restarted.resume_offsets([0]) == {0: 0}
    [latest] = published(restarted, lines, first_offset=0)
    assert latest == published(Processor(), lines)[-1]
    summary = orjson.loads(latest)
    assert list(summary["summary"]["task_metric_attempts"]) == ["b", "a"]
    assert summary["harbor"]["exception_stats"]["UnknownError"] == ["b-1", "a-1"]


def test_a_flush_writes_each_changed_part_once_then_the_checkpoint() -> None:
    store = WriteLog()
    processor = Processor(store=store)
    tasks = [builders.task_spec("a"), builders.task_spec("b")]
    lines = [
        encode(builders.started("run", tasks)),
        encode(builders.trial("a", "a-1")),
        encode(builders.trial("a", "a-2")),
    ]
    published(processor, lines, first_offset=40)
    assert store.writes == []
    assert processor.unflushed() == [0]
    processor.flush(0)
    assert [key for key, _ in store.writes] == [b'h"run"', b't["run","a"]', b"o0"]
    assert store.writes[-1][1] == b"42"
    assert processor.resume_offsets([0, 1]) == {0: 43, 1: 0}
    assert processor.unflushed() == []


def test_bad_messages_become_dead_letters_with_their_coordinates() -> None:
    processor = Processor()
    [dead] = processor.handle(b"run", b"{nope", SOURCE)
    assert dead.stream == "deadletter"
    assert dead.value == b"{nope"
    headers = dict(dead.headers)
    assert headers["evalstream.reason"] == b"not-json"
    assert (headers["evalstream.source.topic"], headers["evalstream.source.offset"]) == (b"events", b"7")
    [mismatch] = processor.handle(b"other", encode(builders.closed("run")), SOURCE)
    assert dict(mismatch.headers)["evalstream.reason"] == b"key-mismatch"


def test_ids_with_separator_characters_survive_a_restart() -> None:
    """Ids are any strings; the store's keys must not split them."""
    run_id, tasks = "r\x00x", [builders.task_spec("a\x00b"), builders.task_spec("a")]
    events = [builders.started(run_id, tasks), builders.trial("a\x00b", "1", run_id=run_id)]
    events += [builders.trial("a", "2", run_id=run_id), builders.closed(run_id)]
    lines = [encode(event) for event in events]
    store: dict[bytes, bytes] = {}
    published(Processor(store=store), lines[:3], flush_at=frozenset({2}), key=run_id.encode())
    after_restart = published(Processor(store=store), lines[3:], first_offset=3, key=run_id.encode())
    assert after_restart == published(Processor(), lines, key=run_id.encode())


def test_the_state_decides_which_offsets_are_new() -> None:
    """After a rebalance the state admits from its checkpoint on: earlier offsets are
    skipped (the state has them), a later one is flagged (events were passed over)."""
    processor = Processor(store={b"o0": b"9"})
    assert processor.resume_offsets([0]) == {0: 10}
    assert processor.admit(Source("events", 0, 9)) is Admission.SKIP
    assert processor.admit(Source("events", 0, 14)) is Admission.AHEAD
    assert processor.admit(Source("events", 0, 10)) is Admission.HANDLE
    processor.handle(b"run", encode(builders.closed("run")), Source("events", 0, 10))
    assert processor.admit(Source("events", 0, 10)) is Admission.SKIP  # redelivered
    assert processor.admit(Source("events", 0, 11)) is Admission.HANDLE
    assert processor.admit(Source("events", 1, 500)) is Admission.HANDLE  # no checkpoint asked for: no opinion


def test_the_offset_to_commit_is_the_one_after_the_checkpoint_and_nothing_without_new_events() -> None:
    processor = Processor(store={})
    lines = [encode(builders.started("run", [builders.task_spec("a")])), encode(builders.trial("a", "a-1"))]
    processor.handle(b"run", lines[0], Source("events", 0, 5))
    assert processor.flush(0) == 6
    assert processor.flush(0) is None
    processor.handle(b"run", lines[1], Source("events", 0, 6))
    assert processor.flush(0) == 7
    assert processor.resume_offsets([0]) == {0: 7}
