"""A task's trial ids, held as one string.

A task has a handful of trials, and a `str` object per id (48 bytes of header besides its
characters) in a list (56 bytes and a pointer an id) cost more than the ids: ~20 bytes a
stored attempt on runs of 5 to 8 trials a task. So a task holds its ids in one string: a
NUL, then each id followed by a NUL, in the order the task first saw them. An id's NUL and
SOH characters are written as SOH STX and SOH SOH, so that every NUL of the string is a
separator: an id is found by one search, and its index is the NULs before it. The string
is immutable, so a savepoint keeps the object itself.

Where `events/native` is built, its `trial_index` searches a held string of one byte a
character in place (~1,900 instructions a score in the compiled fold otherwise, as measured
with the NUL-bounded needle built by two concatenations, then the search and the count).
"""

from __future__ import annotations

from typing import Any, Final

from events.compiled import NATIVE

_TRIAL_INDEX: Final[Any] = None if NATIVE is None else NATIVE.trial_index

NONE: Final = "\0"
"""No trial yet (a one-character string: CPython shares it)."""


def _escaped(trial_id: str) -> str:
    if "\0" in trial_id or "\1" in trial_id:
        return trial_id.replace("\1", "\1\1").replace("\0", "\1\2")
    return trial_id


def _unescaped(text: str) -> str:
    if "\1" not in text:
        return text
    return "\1".join(part.replace("\1\2", "\0") for part in text.split("\1\1"))


def joined(trial_ids: list[str]) -> str:
    """The held form of `trial_ids`, in order."""
    return NONE + "".join(_escaped(trial_id) + "\0" for trial_id in trial_ids)


def listed(held: str) -> list[str]:
    """The trial ids, in order (new strings)."""
    if held == NONE:
        return []
    return [_unescaped(part) for part in held[1:-1].split("\0")]


def count(held: str) -> int:
    """The number of trial ids."""
    return held.count("\0") - 1


def position(held: str, trial_id: str) -> int:
    """The index of `trial_id`; when it is not held, -1 minus the number of ids (so the
    index it would take is `-1 - position`, without counting them again)."""
    if _TRIAL_INDEX is not None:
        found: int | None = _TRIAL_INDEX(held, trial_id)
        if found is not None:
            return found
    at = held.find(f"\0{_escaped(trial_id)}\0")
    return -held.count("\0") if at < 0 else held.count("\0", 0, at)


def appended(held: str, trial_id: str) -> str:
    """`held` with `trial_id` after the others (not there yet)."""
    return f"{held}{_escaped(trial_id)}\0"  # one new string, where + makes two
