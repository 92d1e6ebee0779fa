"""The board: each run's newest records, versions, and what a listener is told."""

from __future__ import annotations

import asyncio

from events.models import InputEvent
from tests.builders import closed, score, started, task_spec, trial
from tests.dashboard.outputs import outputs
from worker.dashboard.board import Board


def log(run_id: str) -> list[InputEvent]:
    return [
        started(run_id, [task_spec("t", {"reward.score": "continuous"})]),
        trial("t", "a", run_id=run_id),
        score("t", "a", "reward", {"score": 1.0}, run_id=run_id),
        closed(run_id),
        score("t", "b", "reward", {"score": 0.0}, run_id=run_id),  # after the close: revision 2
    ]


def test_only_newer_records_are_kept() -> None:
    progress, summaries = outputs(log("r"))
    board = Board()
    assert board.offer_progress(progress[2], 1.0)
    assert not board.offer_progress(progress[1], 2.0)  # older
    assert not board.offer_progress(progress[2], 3.0)  # redelivered
    assert board.offer_summary(summaries[1], 4.0)
    assert not board.offer_summary(summaries[0], 5.0)
    records = board.get("r")
    assert records is not None
    assert (records.progress, records.progress_at) == (progress[2], 1.0)
    assert (records.summary, records.moved_at) == (summaries[1], 4.0)
    assert board.version == 2


def test_changed_since_names_each_run_once_in_order_of_its_last_change() -> None:
    a, _ = outputs(log("a"))
    b, _ = outputs(log("b"))
    board = Board()
    board.offer_progress(a[0], 1.0)
    mark = str(board.stamp)
    board.offer_progress(b[0], 2.0)
    board.offer_progress(a[1], 3.0)
    assert board.changed_since(mark) == ["b", "a"]
    assert board.changed_since(str(board.stamp)) == []


def test_a_tombstone_drops_the_summary_and_a_run_left_with_nothing() -> None:
    progress, summaries = outputs(log("r"))
    _, others = outputs(log("s"))
    board = Board()
    board.offer_progress(progress[-1], 1.0)
    board.offer_summary(summaries[-1], 2.0)
    board.offer_summary(others[-1], 2.0)
    board.drop_summary("r")
    board.drop_summary("s")
    kept = board.get("r")
    assert kept is not None
    assert kept.summary is None
    assert kept.progress is not None
    assert board.get("s") is None
    assert "s" in (board.changed_since(f"{board.epoch}.0") or [])  # a page still showing it hears it went


def test_a_listener_hears_each_changed_run_once_however_often_it_changed() -> None:
    progress, _ = outputs(log("r"))
    others, _ = outputs(log("x"))

    async def check() -> None:
        board = Board()
        listener = board.listen(lambda run_id: run_id == "r")
        for record in progress:
            board.offer_progress(record, 1.0)
        board.offer_progress(others[0], 1.0)
        assert await listener.changes(1.0) == ["r"]
        assert await listener.changes(0.05) == []
        board.close()
        await listener.changes(1.0)
        assert listener.closed

    asyncio.run(check())


def test_a_run_keeps_the_time_of_its_first_record() -> None:
    progress, summaries = outputs(log("r"))
    board = Board()
    board.offer_progress(progress[0], 5.0)
    board.offer_progress(progress[1], 6.0)
    board.offer_summary(summaries[0], 4.0)  # the other topic may be read behind
    records = board.get("r")
    assert records is not None
    assert (records.first_at, records.moved_at) == (4.0, 6.0)
