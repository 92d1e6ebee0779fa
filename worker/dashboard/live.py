"""What each open page is sent live: which runs it watches, and its sections that changed.

One object per open stream; it remembers what it last sent (the runs page: which runs it
listed; a run page: the view; the two-run page: both runs' views), so that a progress event
re-sends the progress sections only, the per-task ones go out again only with a new summary
revision, and the runs page is sent whole only when its list holds other runs. `fragments` is
given the runs changed, or None when the page must be sent everything it shows (the board
cannot tell what changed since the page's state: `Board.changed_since`).
"""

from __future__ import annotations

from typing import Protocol

from projections.analysis.history import history, matches
from worker.dashboard.board import Board
from worker.dashboard.compare_page import compare_fragments
from worker.dashboard.listing import RunsListing, RunsQuery, listing
from worker.dashboard.pages import Fragment, run_fragments, runs_fragments, runs_page_fragments
from worker.dashboard.task_page import task_fragments
from worker.dashboard.views import CompareView, RunRecords, RunView, compare_view, run_view


class Live(Protocol):
    """What one open page shows live."""

    def wants(self, run_id: str) -> bool: ...

    async def fragments(self, board: Board, run_ids: list[str] | None, now: float) -> list[Fragment]: ...


class RunsLive:
    def __init__(self, board: Board, query: RunsQuery) -> None:
        self.board = board
        self.query = query
        self._shown: tuple[str, ...] | None = None

    def wants(self, run_id: str) -> bool:
        if self._shown is None or run_id in self._shown:
            return True
        row = self.board.row(run_id)
        return row is None or self.query.matches(row)

    async def fragments(self, board: Board, run_ids: list[str] | None, now: float) -> list[Fragment]:
        shown = runs_listing(board, self.query)
        listed = tuple(row.run_id for row in shown.rows)
        if run_ids is None or listed != self._shown:
            self._shown = listed
            return runs_page_fragments(shown, now)
        fragments: list[Fragment] = []
        for run_id in run_ids:
            if run_id in listed:
                fragments += runs_fragments(board.row(run_id), run_id, now, self.query)
        return fragments


def runs_listing(board: Board, query: RunsQuery) -> RunsListing:
    return listing(board.rows(), query, len(board))


class RunLive:
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._sent: RunView | None = None

    def wants(self, run_id: str) -> bool:
        return run_id == self.run_id

    async def fragments(self, board: Board, run_ids: list[str] | None, now: float) -> list[Fragment]:
        if run_ids is not None and self.run_id not in run_ids:
            return []
        view = run_view(await board.load(self.run_id) or RunRecords(self.run_id))
        fragments = run_fragments(self._sent, view, now)
        self._sent = view
        return fragments


class CompareLive:
    def __init__(self, baseline: str, candidate: str) -> None:
        self.baseline = baseline
        self.candidate = candidate
        self._sent: CompareView | None = None

    def wants(self, run_id: str) -> bool:
        return run_id in (self.baseline, self.candidate)

    async def fragments(self, board: Board, run_ids: list[str] | None, now: float) -> list[Fragment]:
        view = await compared(board, self.baseline, self.candidate)
        fragments = compare_fragments(self._sent, view, now)
        self._sent = view
        return fragments


async def compared(board: Board, baseline: str, candidate: str) -> CompareView:
    return compare_view(baseline, await board.load(baseline), candidate, await board.load(candidate))


class TaskLive:
    """A task's history (or the flips alone) for a label set: sent again when a run of the set changes."""

    def __init__(self, board: Board, task_id: str | None, labels: dict[str, str]) -> None:
        self.board = board
        self.task_id = task_id
        self.labels = labels

    def wants(self, run_id: str) -> bool:
        row = self.board.row(run_id)  # only a summary changes a history: progress is passed over
        return row is None or (row.revision is not None and matches(row.labels, self.labels))

    async def fragments(self, board: Board, run_ids: list[str] | None, now: float) -> list[Fragment]:
        return task_fragments(history(board.tasks(), self.labels, self.task_id))
