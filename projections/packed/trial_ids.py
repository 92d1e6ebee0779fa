"""A task's trial ids, held as one string.

A task has a handful of trials, and a `str` object per id (48 bytes of header besides its
characters) in a list (56 bytes and a pointer an id) cost more than the ids: ~20 bytes a
stored attempt on runs of 5 to 8 trials a task. So a task holds its ids in one string: a
NUL, then each id followed by a NUL, in the order the task first saw them. An id's NUL and
SOH characters are written as SOH STX and SOH SOH, so that every NUL of the string is a
separator: an id is found by one search, and its index is the NULs before it
(`projections.kernels.trial_index`). The string is immutable, so a savepoint keeps the object
itself.
"""

from __future__ import annotations

from typing import Final

NONE: Final = "\0"
"""No trial yet (a one-character string: CPython shares it)."""


def escaped(trial_id: str) -> str:
    """The id as the held string writes it."""
    if "\0" in trial_id or "\1" in trial_id:
        return trial_id.replace("\1", "\1\1").replace("\0", "\1\2")
    return trial_id


def _unescaped(text: str) -> str:
    if "\1" not in text:
        return text
    return "\1".join(part.replace("\1\2", "\0") for part in text.split("\1\1"))


def joined(trial_ids: list[str]) -> str:
    """The held form of `trial_ids`, in order."""
    return NONE + "".join(escaped(trial_id) + "\0" for trial_id in trial_ids)


def listed(held: str) -> list[str]:
    """The trial ids, in order (new strings)."""
    if held == NONE:
        return []
    return [_unescaped(part) for part in held[1:-1].split("\0")]


def count(held: str) -> int:
    """The number of trial ids."""
    return held.count("\0") - 1


def appended(held: str, trial_id: str) -> str:
    """`held` with `trial_id` after the others (not there yet)."""
    return f"{held}{escaped(trial_id)}\0"  # one new string, where + makes two
