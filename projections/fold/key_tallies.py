"""The run-wide verdict counts of one pass@k-eligible key, kept as its tasks' (n, c) move: what
progress shows of the verdicts, without a pass over the tasks (SEMANTICS.md sections 3 and 7)."""

from __future__ import annotations

from dataclasses import dataclass

from projections.figures.passk import Tally
from projections.figures.verdicts import FAILED, FLAKY, SOLVED, verdict_of


@dataclass(slots=True, init=False)
class KeyTally:
    """Run-wide verdict counts of one eligible key."""

    # Its __init__ is written out: the compiled fold compiles a class body's methods, not a
    # dataclass's generated ones (one is made per eligible key of every run).

    verdicts: dict[str, int]
    unmeasured: int
    pending: int
    """Declared tasks with this key that nothing has arrived for (counted in `unmeasured` too)."""
    moves: int
    """Tasks' (n, c) added or moved so far: the same count, the same tallies."""

    def __init__(self) -> None:
        self.verdicts = {SOLVED: 0, FLAKY: 0, FAILED: 0}
        self.unmeasured = 0
        self.pending = 0
        self.moves = 0

    def add(self, tally: Tally) -> None:
        self.moves += 1
        n, c = tally
        if n == 0:
            self.unmeasured += 1
        else:
            self.verdicts[verdict_of(n, c)] += 1

    def move(self, n: int, c: int, new_n: int, new_c: int) -> None:
        """A task's (n, c) for this key became (new_n, new_c)."""
        self.moves += 1
        if n == 0:
            self.unmeasured -= 1
        else:
            self.verdicts[verdict_of(n, c)] -= 1
        self.verdicts[verdict_of(new_n, new_c)] += 1
