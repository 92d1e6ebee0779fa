"""Per-task verdicts (SEMANTICS.md section 3)."""

from typing import Final

SOLVED: Final = "solved"
FLAKY: Final = "flaky"
FAILED: Final = "failed"
UNMEASURED: Final = "unmeasured"
PENDING: Final = "pending"
"""Progress only: a declared task nothing has arrived for while the run is open."""


def verdict_of(n: int, c: int) -> str:
    """The verdict of a key with n attempts of which c pass (a dead trial is a non-pass)."""
    if n == 0:
        return UNMEASURED
    if c == n:
        return SOLVED
    if c == 0:
        return FAILED
    return FLAKY
