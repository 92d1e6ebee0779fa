"""An `evalstream` command piped into a reader that leaves early (`| head -n1`), for real:
coreutils' `head` reads the command's stdout through a pipe the kernel holds to one page, so
the command is still writing when `head` exits, whatever its output's size past a few pages."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

PAGE = 4096


@dataclass(frozen=True)
class Piped:
    code: int
    """The command's exit code."""
    stderr: str
    """What the command said."""
    read: bytes
    """What `head` printed."""


def into_head(*args: str, head: tuple[str, ...] = ("-n1",), stdin: bytes | None = None) -> Piped:
    """`evalstream ARGS | head HEAD`, the command's stdin `stdin` (else none)."""
    reading, writing = os.pipe()
    fcntl.fcntl(writing, fcntl.F_SETPIPE_SZ, PAGE)
    with tempfile.TemporaryFile() as printed:  # a file: `head` never waits on its own reader
        try:
            command = subprocess.Popen(
                [sys.executable, "-m", "worker.commands.cli", *args],
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=writing,
                stderr=subprocess.PIPE,
            )
            reader = subprocess.Popen(["head", *head], stdin=reading, stdout=printed)
        finally:
            os.close(reading)
            os.close(writing)
        _, stderr = command.communicate(stdin, timeout=120)
        reader.wait(timeout=120)
        printed.seek(0)
        return Piped(command.returncode, stderr.decode(), printed.read())
