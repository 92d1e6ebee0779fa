"""`evalstream publish`: a checked event log sent to the events topic."""

from __future__ import annotations

import argparse
import asyncio
import sys

from worker.commands.cli.arguments import EVENT_LOG, Commands, command, connection_flags, publishing_settings
from worker.failure import opened


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "publish",
        "publish a JSONL event log to the events topic, keyed by run_id, once every line is a valid event",
        "evalstream publish log.jsonl --bootstrap kafka:9092",
        handle,
    )
    parser.add_argument("path", help="a JSON Lines event log, or - for stdin")
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="publish the valid lines and report the rest (default: an invalid line publishes nothing, exit 2)",
    )
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from worker.commands.checked import checked
    from worker.commands.clients import publish

    with opened(args.path, EVENT_LOG) as stream:
        log = checked(stream, sys.stderr, skip_invalid=args.skip_invalid)  # before any broker is asked
        settings = publishing_settings(args)
        sent = asyncio.run(publish(settings, log.lines))
    skipped = f" ({log.invalid} invalid lines skipped)" if log.invalid else ""
    print(f"published {sent} messages to {settings.events_topic} at {settings.bootstrap}{skipped}", file=sys.stderr)
    return 0
