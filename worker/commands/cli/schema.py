"""`evalstream schema`: the JSON Schema of each event type written into a directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from worker.commands.cli.arguments import Commands, command
from worker.failure import CommandError


def add(commands: Commands) -> None:
    parser = command(
        commands, "schema", "write a JSON Schema per event type into DIR", "evalstream schema schemas/", handle
    )
    parser.add_argument("directory", metavar="DIR")


def handle(args: argparse.Namespace) -> int:
    from events.schema import write_schemas

    try:
        written = write_schemas(Path(args.directory))
    except OSError as error:
        raise CommandError(f"cannot write into {args.directory}: {error.strerror or error}") from None
    for path in written:
        print(path)
    return 0
