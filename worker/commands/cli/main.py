"""The `evalstream` command line: the parser of every command (a module each, beside this one),
and `main`, which runs the one asked for.

Every command fails the same way (`worker.failure`): a sentence on stderr after
the command's name, exit code 2 for bad usage or input and 1 for an environment that is
not there, and no traceback unless `--debug` (or EVALSTREAM_DEBUG=1) asks for one
(`explained`). A command whose output's reader has gone (`| head`) stops there, quietly, exit 0
(`worker.commands.closed_output`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import get_args

from events.outputs import RunSummary
from projections.storage import VERSION as STORAGE_VERSION
from worker.commands.cli import (
    alerts,
    broker,
    dashboard,
    digest,
    export,
    follow,
    gate,
    history,
    import_,
    publish,
    replay,
    retry,
    schema,
    simulate,
    summaries,
    watch,
    worker,
)
from worker.commands.cli.explained import explained
from worker.commands.closed_output import CLOSED, reader_gone

# In the order `evalstream --help` lists them.
COMMANDS = (
    replay,
    digest,
    import_,
    follow,
    worker,
    publish,
    summaries,
    simulate,
    watch,
    history,
    dashboard,
    gate,
    alerts,
    export,
    retry,
    schema,
    broker,
)


def version_text() -> str:
    """The package's version, the event contract's and the store's: what a bug report needs."""
    # The contract's version is the one the output models are typed with (`Literal[1]`).
    (contract,) = get_args(RunSummary.model_fields["schema_version"].annotation)
    return f"evalstream {version('evalstream')} (event contract version {contract}, storage version {STORAGE_VERSION})"


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="evalstream",
        description="Live, exact, replayable eval run summaries.",
        epilog="example: evalstream replay log.jsonl | evalstream digest   (evalstream COMMAND --help for each)",
    )
    root.add_argument("--version", action="version", version=version_text())
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add(commands)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    debug = args.debug or os.environ.get("EVALSTREAM_DEBUG", "") not in ("", "0")
    if not debug:
        # The clients' own log lines ("Unable connect to ...") would come before our sentence;
        # the worker turns them back on once it runs.
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if isinstance(error, BrokenPipeError) and reader_gone():
            return CLOSED
        if debug:
            raise
        message, code = explained(error, args)
        print(f"evalstream {args.command}: {message}", file=sys.stderr)
    return code
