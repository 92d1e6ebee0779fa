"""`evalstream watch`: a live terminal view of one run."""

from __future__ import annotations

import argparse
import asyncio

from worker.commands.cli.arguments import Commands, command, connection_flags, settings_of


def add(commands: Commands) -> None:
    parser = command(
        commands, "watch", "a live terminal view of one run", "evalstream watch run-7 --timeout 60", handle
    )
    parser.add_argument("run_id")
    parser.add_argument("--forever", action="store_true", help="keep watching after the run closes")
    parser.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="give up (exit 1) if the run shows no progress by then"
    )
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from worker.commands.watch import watch

    asyncio.run(watch(settings_of(args), args.run_id, until_closed=not args.forever, timeout=args.timeout))
    return 0
