"""`evalstream follow harbor|nemo`: a running Harbor job or nel evaluation published as its trials end."""

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
        "publish a running Harbor job's or nel evaluation's trials as they end, and close its runs when it is done",
        "evalstream follow harbor jobs/2026-12-01__10-00-00 & evalstream watch 2026-12-01__10-00-00:oracle__my-tasks",
        handle,
    )
    parser.description = (
        "Watch a Harbor job directory while `harbor run` writes it, or a NeMo Evaluator output directory while "
        "`nel eval run` writes it: each trial's events go to the events topic as it ends (a Harbor trial's "
        "result.json, a line of nel's verified_log.jsonl or results.jsonl), each run's run.started and "
        "run.closed when it is done. Restarting it is harmless (the same event ids)."
    )
    parser.add_argument("source", choices=["harbor", "nemo"], help="what JOB_DIR is")
    parser.add_argument(
        "path", metavar="JOB_DIR", help="the Harbor job directory (jobs/<job_name>) or the nel output directory (-o)"
    )
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
    from worker.commands.follow import Followed, HarborJob, follow
    from worker.commands.follow_nel import NelRun

    path = Path(args.path)
    if not path.is_dir():
        writer = (
            "`harbor run` is writing (jobs/<name>)" if args.source == "harbor" else "`nel eval run` writes (its -o)"
        )
        raise CommandError(f"{path}: no such directory; pass the directory {writer}")
    options = ImportOptions(run_id=args.run_id)
    source: Followed = HarborJob(path, options) if args.source == "harbor" else NelRun(path, options)
    settings = publishing_settings(args)
    sent = asyncio.run(follow(settings, source, interval=args.interval, log=sys.stderr))
    print(f"done: published {sent} events to {settings.events_topic} at {settings.bootstrap}", file=sys.stderr)
    return 0
