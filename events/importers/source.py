"""What every importer shares: its options, its errors, and how it names events."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from events.models import InputEvent

MAX_ID_CHARS = 128
"""EVENTS.md's limit on `event_id` (and, with 256, on `run_id`)."""


@dataclass(frozen=True, slots=True)
class ImportOptions:
    run_id: str | None = None
    """Overrides the run id derived from the source."""
    as_recorded: bool = False
    """NeMo bundles only: keep every score exactly as the bundle has it."""


class SourceError(ValueError):
    """Results that cannot be imported: the message names the file, what is wrong with it,
    and what to do."""


Importer = Callable[[Path, ImportOptions], Iterator[InputEvent]]


def json_value(text: str | bytes, where: str) -> Any:
    """`json.loads(text)`, where a document nested deeper than Python's reader can follow is a
    `SourceError` naming `where` (no harness writes one), not a crash. `JSONDecodeError` is
    left to the caller, which knows what the file should have been."""
    try:
        return json.loads(text)
    except RecursionError:
        raise SourceError(
            f"{where}: nested deeper than a JSON reader follows; no harness writes such a file: "
            "check that it is the harness's output"
        ) from None


def json_lines(lines: Iterable[str], file: Path, what: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each non-blank line of a JSON-lines `file` as (where, object), `where` naming the file
    and the line. A line that is not one JSON object is a `SourceError` naming it and ending
    with `what`: what the file should have been, or what to do."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{file}, line {number}"
        try:
            row = json_value(line, where)
        except json.JSONDecodeError as error:
            raise SourceError(f"{where}: not valid JSON ({error.msg} at column {error.colno}); {what}") from None
        if not isinstance(row, dict):
            raise SourceError(f"{where}: a line must be one JSON object, not {type(row).__name__}; {what}")
        yield where, row


def event_id(*parts: str) -> str:
    """A stable event id made of the source's own names (`"harbor", trial, "score"`).

    Ids over EVENTS.md's 128 characters keep a readable head and end in a digest of the
    whole, so that two long names never collide.
    """
    whole = ":".join(parts)
    if len(whole) <= MAX_ID_CHARS:
        return whole
    digest = hashlib.sha256(whole.encode()).hexdigest()[:32]
    return f"{whole[: MAX_ID_CHARS - len(digest) - 1]}~{digest}"
