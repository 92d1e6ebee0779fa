"""The board: each run's newest records, versions, and what a listener is told."""

from __future__ import annotations

import asyncio

from events.models import InputEvent
from events.outputs import RunSummary
from tests.builders import closed, score, started, task_spec, trial
from tests.worker.dashboard.outputs import outputs
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


class Shelf:
    """The summaries topic as a lookup: what was offered at each place, and the reads asked for."""

    def __init__(self) -> None:
        self.held: dict[tuple[int, int], RunSummary] = {}
        self.reads: list[tuple[int, int]] = []

    def put(self, board: Board, summary: RunSummary, at: float) -> bool:
        where = (0, len(self.held))
        self.held[where] = summary
        return board.offer_summary(summary, at, where)

    async def read(self, partition: int, offset: int) -> RunSummary | None:
        self.reads.append((partition, offset))
        return self.held.get((partition, offset))


def closed_runs(board: Board, shelf: Shelf, count: int) -> list[RunSummary]:
    summaries = [outputs(log(f"c{index}"))[1][-1] for index in range(count)]
    for index, summary in enumerate(summaries):
        assert shelf.put(board, summary, float(index + 1))
    return summaries


def test_memory_holds_the_open_runs_and_the_recent_closed_runs_and_indexes_the_rest() -> None:
    shelf = Shelf()
    board = Board(recent=2, lookup=shelf)
    closed_runs(board, shelf, 5)
    progress, _ = outputs(log("open"))
    board.offer_progress(progress[1], 0.5)  # open: kept however old
    assert (len(board), board.in_memory()) == (6, 3)
    assert [row.run_id for row in board.rows()] == ["open", "c4", "c3", "c2", "c1", "c0"]
    assert board.get("c0") is None
    assert board.get("c4") is not None
    row = board.row("c0")
    assert row is not None
    assert row.labels == {}
    assert row.pass_at_1 == {"reward.score": 0.5}
    assert sorted(tasks.run_id for tasks in board.tasks()) == ["c0", "c1", "c2", "c3", "c4"]


def test_an_older_runs_summary_is_read_back_from_where_the_index_says() -> None:
    shelf = Shelf()
    board = Board(recent=1, lookup=shelf)
    summaries = closed_runs(board, shelf, 3)

    async def check() -> None:
        records = await board.load("c1")
        assert records is not None
        assert records.summary == summaries[1]
        assert records.summary_at == 2.0
        assert await board.load("c1") is records  # kept a while: a page's stream asks again
        assert shelf.reads == [(0, 1)]
        assert await board.load("nope") is None

    asyncio.run(check())


def test_a_run_that_left_memory_keeps_its_numbers_and_comes_back_with_a_new_revision() -> None:
    shelf = Shelf()
    board = Board(recent=1, lookup=shelf)
    progress, summaries = outputs(log("r"))
    board.offer_progress(progress[-1], 1.0)
    shelf.put(board, summaries[0], 1.0)
    closed_runs(board, shelf, 1)  # c0, newer: r leaves memory
    assert board.get("r") is None
    assert not board.offer_progress(progress[1], 5.0)  # older
    assert not shelf.put(board, summaries[0], 5.0)  # redelivered
    assert shelf.put(board, summaries[1], 6.0)  # revision 2: the newest closed run now
    assert board.get("r") is not None
    assert board.get("c0") is None


def test_a_page_the_board_cannot_bring_up_to_date_is_sent_everything() -> None:
    shelf = Shelf()
    board = Board(recent=1, lookup=shelf, epoch="e1")
    closed_runs(board, shelf, 1)
    page = str(board.stamp)
    assert board.changed_since(page) == []
    assert board.changed_since("e0.1") is None  # another epoch: the dashboard restarted
    assert board.changed_since("e1.99") is None  # ahead of this board
    assert board.changed_since(None) is None
    closed_runs_after = outputs(log("later"))[1][-1]
    shelf.put(board, closed_runs_after, 10.0)  # c0 leaves memory: its stamp is forgotten
    assert board.changed_since(page) == ["later"]
    assert board.changed_since("e1.0") is None  # c0 changed after it, and the board forgot when


def test_a_tombstone_of_an_indexed_run_removes_it() -> None:
    shelf = Shelf()
    board = Board(recent=1, lookup=shelf)
    closed_runs(board, shelf, 2)
    page = str(board.stamp)
    board.drop_summary("c0")
    assert board.row("c0") is None
    assert len(board) == 1
    assert board.changed_since(page) == ["c0"]
