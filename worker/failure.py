"""How commands fail: one exception, one exit code per kind of failure, no traceback.

A command raises `CommandError` with a sentence that names what failed (the file, the line,
the broker address), why, and what to do; `worker.commands.cli.main` prints it after the
command's name and exits with its code. Exit codes: 2 for bad usage or input (argparse's
own), 1 for an environment that is not there (no broker, no topic, no such run yet).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

USAGE = 2
ENVIRONMENT = 1


class CommandError(Exception):
    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code


def topic_missing(
    topic: str, bootstrap: str, flag: str = "the --*-topic flags", instead: str | None = None
) -> CommandError:
    """The error of a command whose topic is not on the cluster: the worker creates its
    topics, so the usual cause is a worker never started there, or a flag naming another
    topic (`flag`); `instead` is what the command can do without the topic, if anything."""
    return CommandError(
        f"no topic {topic!r} at {bootstrap}: start the worker (it creates its topics), or check {flag} and "
        "--bootstrap" + (f", or {instead}" if instead else ""),
        ENVIRONMENT,
    )


@contextmanager
def opened(path: str, expected: str) -> Iterator[BinaryIO]:
    """`path` open for reading (`-`: stdin), or a `CommandError` saying why it cannot be;
    `expected` says what the command wants there ("a JSONL event log")."""
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        stream = open(path, "rb")  # noqa: SIM115  # closed below, after the caller's block
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror or error}; pass {expected}, or - for stdin") from None
    with stream:
        yield stream
