"""A command whose output's reader has gone (`evalstream summaries | head -n1`): its work is
over, and it ends quietly with exit code `CLOSED`, 0. Not the 141 of a process killed by
SIGPIPE: the reader took what it wanted, and a script under `set -o pipefail` that reads the
first lines has not failed.

A write to such a pipe raises `BrokenPipeError` (Python ignores SIGPIPE). `reader_gone` tells
that from a broken pipe elsewhere (a socket, a child process) by asking the kernel about the
command's own stdout and stderr: poll reports POLLERR on a pipe no reader holds open.
"""

from __future__ import annotations

import os
import select
import sys
from typing import Final

CLOSED: Final = 0


def reader_gone() -> bool:
    """Whether the reader of stdout or stderr has gone. Each such stream's descriptor is
    pointed at /dev/null, so that the interpreter's last flush of what it still holds for it
    fails nowhere and says nothing."""
    gone = False
    for stream in (sys.stdout, sys.stderr):
        try:
            descriptor = stream.fileno()
        except (AttributeError, OSError, ValueError):  # replaced by an object without one (a test's capture)
            continue
        poller = select.poll()
        poller.register(descriptor, 0)  # POLLERR and POLLHUP are reported whatever is asked
        if any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0)):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, descriptor)
            os.close(null)
            gone = True
    return gone
