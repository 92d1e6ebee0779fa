"""`evalstream follow harbor`: a running Harbor job published as its trials end."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from worker.commands.cli.arguments import Commands, command, connection_flags, publishing_settings
from worker.commands.follow import DEFAULT_INTERVAL
from worker.failure import CommandError


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "follow",
        "publish a running Harbor job's trials as they end, and close its runs when it is done",
        "evalstream follow harbor jobs/2026-12-01__10-00-00 & evalstream watch 2026-12-01__10-00-00:oracle__my-tasks",
        handle,
    )
    parser.description = (
        "Watch a Harbor job directory while `harbor run` writes it: each trial's events go to the events topic as "
        "its result.json appears, each run's run.started and run.closed when the job's result.json says it "
        "finished. Restarting it is harmless (the same event ids)."
    )
    parser.add_argument("source", choices=["harbor"], help="what JOB_DIR is")
    parser.add_argument("path", metavar="JOB_DIR", help="the job directory (jobs/<job_name>)")
    parser.add_argument("--run-id", help="use this run id instead of the one derived from the job")
    parser.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"how often to look at the directory (default {DEFAULT_INTERVAL})",
    )
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from events.importers.source import ImportOptions
    from worker.commands.follow import follow_harbor

    path = Path(args.path)
    if not path.is_dir():
        raise CommandError(f"{path}: no such directory; pass the job directory `harbor run` is writing (jobs/<name>)")
    settings = publishing_settings(args)
    sent = asyncio.run(
        follow_harbor(settings, path, ImportOptions(run_id=args.run_id), interval=args.interval, log=sys.stderr)
    )
    print(f"job done: published {sent} events to {settings.events_topic} at {settings.bootstrap}", file=sys.stderr)
    return 0
