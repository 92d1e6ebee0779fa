"""One object for equal immutable values the fold keeps per task.

Most tasks of a run have the same keys and their metrics the same output names; a tuple of
them per task would repeat the same few names thousands of times.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TypeVar

T = TypeVar("T")


@lru_cache(maxsize=4096)
def shared(value: T) -> T:
    """The first value equal to `value` that was given (of the last 4,096 distinct)."""
    return value
