"""pass@k and pass^k: the per-task estimators, and the run-wide tally of one eligible key.

SEMANTICS.md sections 2 and 8. Each task keeps its own (n, c) per key, updated in O(1) as
attempts land; a task's per-k figures depend on (n, c) alone and are cached. The
run-wide means are summed from those figures, in summary task order, when a summary or
progress event is built: a running float total would drift from that sum by an ulp, and
progress must say exactly what the summary would.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from projections.figures.verdicts import FAILED, FLAKY, SOLVED, verdict_of

Tally = tuple[int, int]
"""(n, c): a task's attempts for a key, and how many of them pass."""


def passes(value: float | None) -> bool:
    """Full credit: not null and >= 1.0 (NaN never passes)."""
    return value is not None and value >= 1.0


@lru_cache(maxsize=65_536)
def estimates(n: int, c: int) -> tuple[float, ...]:
    """Per-task pass@k for k = 1..n: 1 - C(n-c, k) / C(n, k).

    The product form 1 - prod_{i=n-c+1..n} (1 - k/i), i ascending, as the NeMo evaluator
    computes it, so the floats agree with it to the last bit; 1.0 when n - c < k.
    """
    figures: list[float] = []
    for k in range(1, n + 1):
        if n - c < k:
            figures.append(1.0)
            continue
        product = 1.0
        for i in range(n - c + 1, n + 1):
            product *= 1.0 - k / i
        figures.append(1.0 - product)
    return tuple(figures)


@lru_cache(maxsize=65_536)
def hat_estimates(n: int, c: int) -> tuple[float, ...]:
    """Per-task pass^k for k = 1..n (SEMANTICS.md section 8): prod_{i=0..k-1} (c-i)/(n-i).

    Multiplied in that order, each k's product extending the one before (the same floats as
    computing each k afresh); 0.0 when c < k, where the product would reach -0.0.
    """
    figures: list[float] = []
    product = 1.0
    for i in range(n):
        if c <= i:
            figures.extend([0.0] * (n - i))
            break
        product *= (c - i) / (n - i)
        figures.append(product)
    return tuple(figures)


@dataclass(slots=True, init=False)
class KeyTally:
    """Run-wide verdict counts of one eligible key, kept as tasks' (n, c) change."""

    # Its __init__ is written out: a dataclass's generated one runs as Python even in the
    # compiled fold (one is made per eligible key of every run).

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
