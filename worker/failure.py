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


LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})
"""Where `evalstream broker start` listens."""


def unreachable(bootstrap: str, *, secure: bool) -> str:
    """What to say of a `bootstrap` no broker answered at: where it was, and what to do. When
    it names this machine, the local broker to start, on the port asked (the secured one for a
    `secure` client)."""
    said = f"cannot reach a Kafka broker at {bootstrap} (the connection failed)."
    elsewhere = "point --bootstrap (or EVALSTREAM_BOOTSTRAP) at a running cluster"
    first = bootstrap.split(",", maxsplit=1)[0].strip()
    host, _, port = first.rpartition(":")
    if not port.isdigit():  # no port given: Kafka's default
        host, port = first, "9092"
    if host not in LOCAL_HOSTS:
        return f"{said} Check that a broker runs at {first} and that this machine may reach it, or {elsewhere}."
    flags = f"--secure --port {port}" if secure else f"--port {port}"
    return f"{said} Start one with `evalstream broker start {flags}`, or {elsewhere}."


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
