"""`evalstream dashboard`: the live web pages of every run (`worker.dashboard`)."""

from __future__ import annotations

import argparse
import asyncio

from worker.commands.cli.arguments import Commands, command, connection_flags, positive, settings_of


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "dashboard",
        "serve a live web page of every run (read-only), from the progress and summaries topics",
        "evalstream dashboard --port 6067   (then open http://127.0.0.1:6067/)",
        handle,
    )
    parser.add_argument(
        "--port",
        dest="dashboard_port",
        metavar="PORT",
        type=int,
        help="env EVALSTREAM_DASHBOARD_PORT (default 6067; 0: any free)",
    )
    parser.add_argument(
        "--host",
        dest="dashboard_host",
        metavar="HOST",
        help="address to listen on (env EVALSTREAM_DASHBOARD_HOST, default 127.0.0.1: this machine only)",
    )
    parser.add_argument(
        "--recent",
        dest="dashboard_recent",
        metavar="RUNS",
        type=positive,
        help="closed runs kept in memory, the last to move (env EVALSTREAM_DASHBOARD_RECENT_RUNS, default 200); "
        "older ones are read back from the summaries topic when a page asks",
    )
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from worker.dashboard.service import serve

    settings = settings_of(args)
    asyncio.run(serve(settings, settings.dashboard_host, settings.dashboard_port))
    return 0
