"""`evalstream digest`: summary and progress lines printed for people."""

from __future__ import annotations

import argparse
import sys

from worker.commands.cli.arguments import Commands, command
from worker.failure import opened


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "digest",
        "print run.summary/run.progress JSON lines for people",
        "evalstream summaries | evalstream digest",
        handle,
    )
    parser.add_argument("path", nargs="?", default="-", help="JSON lines (default: stdin)")


def handle(args: argparse.Namespace) -> int:
    from worker.commands.digest import digest

    with opened(args.path, "JSON lines of run.summary or run.progress events") as stream:
        digest(stream, sys.stdout, "stdin" if args.path == "-" else args.path)
    return 0
