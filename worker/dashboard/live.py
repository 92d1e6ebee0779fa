"""What each open page is sent live: which runs it watches, and its sections that changed.

One object per open stream; it remembers what it last sent (a run page: the view; the two-run
page: both runs' revisions), so that a progress event re-sends the progress sections only and
the per-task ones go out again only with a new summary revision.
"""

from __future__ import annotations

from typing import Protocol

from worker.dashboard.board import Board
from worker.dashboard.compare_page import compare_fragments
from worker.dashboard.pages import Fragment, run_fragments, runs_fragments
from worker.dashboard.views import CompareView, RunRecords, RunView, compare_view, run_row, run_view


class Live(Protocol):
    """What one open page shows live."""

    def wants(self, run_id: str) -> bool: ...

    def fragments(self, board: Board, run_ids: list[str], now: float) -> list[Fragment]: ...


class RunsLive:
    def wants(self, run_id: str) -> bool:
        return True

    def fragments(self, board: Board, run_ids: list[str], now: float) -> list[Fragment]:
        fragments: list[Fragment] = []
        for run_id in run_ids:
            records = board.get(run_id)
            row = run_row(records) if records is not None else None
            fragments += runs_fragments(
                row, run_id, now, summarized=records is not None and records.summary is not None
            )
        return fragments


class RunLive:
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._sent: RunView | None = None

    def wants(self, run_id: str) -> bool:
        return run_id == self.run_id

    def fragments(self, board: Board, run_ids: list[str], now: float) -> list[Fragment]:
        if self.run_id not in run_ids:
            return []
        view = run_view(board.get(self.run_id) or RunRecords(self.run_id))
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

    def fragments(self, board: Board, run_ids: list[str], now: float) -> list[Fragment]:
        view = compared(board, self.baseline, self.candidate)
        fragments = compare_fragments(self._sent, view, now)
        self._sent = view
        return fragments


def compared(board: Board, baseline: str, candidate: str) -> CompareView:
    return compare_view(baseline, board.get(baseline), candidate, board.get(candidate))
