"""Per-task verdicts (SEMANTICS.md section 3)."""

SOLVED = "solved"
FLAKY = "flaky"
FAILED = "failed"
UNMEASURED = "unmeasured"
PENDING = "pending"
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
