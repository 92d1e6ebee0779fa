"""`evalstream history`: a task across the runs of a label set."""

from __future__ import annotations

import argparse

from worker.commands.cli.arguments import Commands, command, connection_flags, settings_of, summaries_file_flag


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "history",
        "a task's verdict and pass rate in each run of a label set, and the tasks whose verdict changed",
        "evalstream history --label benchmark=swe-lite --task django-1234",
        handle,
    )
    parser.add_argument(
        "--label", action="append", default=[], metavar="NAME=VALUE", help="only runs with this label (repeatable)"
    )
    parser.add_argument("--task", metavar="TASK_ID", help="this task's verdict and pass rate in each run")
    parser.add_argument("--json", action="store_true", help="the figures as JSON (what /task?format=json gives)")
    summaries_file_flag(parser)
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from worker.commands.history import run

    return run(args.label, args.task, from_file=args.from_file, settings=settings_of(args), as_json=args.json)
