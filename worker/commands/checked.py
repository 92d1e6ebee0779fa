"""`evalstream publish` checks a log before it sends a line of it: a line no worker can read
(`events.codec.decode` refuses it) would only be dead-lettered later, unseen by whoever sent it.

Each invalid line is reported on stderr as replay reports it (`line N: reason: sentence`).
By default one invalid line publishes nothing (`CommandError`, exit 2); with `skip_invalid`
the valid lines are published. What depends on a run's state (a second `run.started`) is the
worker's to refuse: each line is checked on its own.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, TextIO

from events.codec import DecodeError, decode
from worker.failure import CommandError


@dataclass(frozen=True)
class Checked:
    lines: Iterator[bytes]
    """The valid lines, read again from the start."""
    invalid: int
    """How many lines were reported."""


def checked(stream: BinaryIO, err: TextIO, *, skip_invalid: bool) -> Checked:
    """Read `stream` (a JSONL event log) once to check every line, reporting each invalid one
    to `err`; then its valid lines. A stream that cannot seek (a pipe) is copied to a
    temporary file first."""
    source: BinaryIO = stream if stream.seekable() else _copied(stream)
    invalid = set()
    events = 0
    for number, line in enumerate(source, 1):
        value = line.rstrip(b"\r\n")
        if not value.strip():
            continue
        events += 1
        try:
            decode(value)
        except DecodeError as error:
            invalid.add(number)
            err.write(f"line {number}: {error.code}: {error}\n")
    if invalid and not skip_invalid:
        raise CommandError(
            f"{len(invalid)} of {events} lines are not valid events (each said above); nothing was published. "
            f"Fix them, or pass --skip-invalid to publish the other {events - len(invalid)}"
        )
    source.seek(0)
    return Checked((line for number, line in enumerate(source, 1) if number not in invalid), len(invalid))


def _copied(stream: BinaryIO) -> BinaryIO:
    copy: BinaryIO = tempfile.TemporaryFile()  # noqa: SIM115  # the caller's lines read from it; gone when dropped
    shutil.copyfileobj(stream, copy)
    copy.seek(0)
    return copy
