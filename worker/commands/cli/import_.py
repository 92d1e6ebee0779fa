"""`evalstream import`: a harness's results as a JSONL event log, or published."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from pathlib import Path

from worker.commands.cli.arguments import Commands, command, connection_flags, publishing_settings
from worker.commands.importing import SOURCES
from worker.failure import CommandError


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "import",
        "write a harness's results (Harbor job, Inspect log, NeMo bundle or nel output) as a JSONL event log on stdout",
        "evalstream import harbor jobs/2026-12-01__10-00-00 | evalstream replay -",
        handle,
    )
    parser.add_argument("source", choices=sorted(SOURCES), help="what PATH holds")
    parser.add_argument(
        "path", help="a Harbor job directory, an Inspect .eval/.json log, a NeMo bundle or nel output directory"
    )
    parser.add_argument("--run-id", help="use this run id instead of the one derived from the source")
    parser.add_argument(
        "--as-recorded", action="store_true", help="nemo: keep every score exactly as the bundle has it"
    )
    parser.add_argument("--publish", action="store_true", help="send the events to the events topic instead")
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from events.importers.source import ImportOptions
    from worker.commands.importing import import_lines

    if args.as_recorded and args.source != "nemo":
        raise CommandError("--as-recorded is for NeMo bundles only")
    lines = import_lines(args.source, Path(args.path), ImportOptions(run_id=args.run_id, as_recorded=args.as_recorded))
    # The first event is read before any broker is asked, so that a wrong path is told as such.
    lines = itertools.chain([first] if (first := next(lines, None)) is not None else [], lines)
    if args.publish:
        from worker.commands.clients import publish

        settings = publishing_settings(args)
        sent = asyncio.run(publish(settings, lines))
        print(f"published {sent} events to {settings.events_topic} at {settings.bootstrap}", file=sys.stderr)
    else:
        out = sys.stdout.buffer
        for line in lines:
            out.write(line + b"\n")
        out.flush()
    return 0
