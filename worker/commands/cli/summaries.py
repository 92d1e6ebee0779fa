"""`evalstream summaries`: the summaries topic's records printed."""

from __future__ import annotations

import argparse
import asyncio
import sys

from worker.commands.cli.arguments import Commands, command, connection_flags, settings_of
from worker.failure import ENVIRONMENT, CommandError


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "summaries",
        "print the run.summary records of the summaries topic",
        "evalstream summaries --run run-7 | evalstream digest",
        handle,
    )
    parser.add_argument("--follow", action="store_true", help="keep printing new summaries")
    parser.add_argument("--run", help="only this run_id (exit 1 when it has none)")
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from worker.commands.clients import read_summaries

    settings = settings_of(args)
    count = asyncio.run(read_summaries(settings, sys.stdout.buffer, follow=args.follow, run_id=args.run))
    if args.run is not None and not count:
        raise CommandError(
            f"no summary of run {args.run!r} in topic {settings.summaries_topic!r} at {settings.bootstrap}; "
            "a run has one once its run.closed is applied (`evalstream watch` shows runs still open)",
            ENVIRONMENT,
        )
    return 0
