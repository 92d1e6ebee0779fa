"""`evalstream alerts`: post to a webhook when a run closes, when its dead trials pass a
threshold, and when a task's verdict flips against the previous run of the same labels."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from worker.commands.cli.arguments import Commands, command, connection_flags, settings_of

DEFAULT_STATE = "~/.cache/evalstream/alerts"


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "alerts",
        "post to a webhook when a run closes, dies too often, or flips a task's verdict",
        "evalstream alerts --webhook https://hooks.slack.com/services/T0/B0/XXXX --match benchmark,model",
        handle,
    )
    parser.add_argument("--webhook", required=True, metavar="URL", help="where alerts go (Slack, Teams, or any JSON)")
    parser.add_argument(
        "--dead-trials",
        type=float,
        default=0.2,
        metavar="SHARE",
        help="alert when more than this share of a run's finished trials died (default 0.2)",
    )
    parser.add_argument(
        "--min-trials", type=int, default=10, metavar="N", help="... once it has at least N finished (default 10)"
    )
    parser.add_argument(
        "--match",
        default="benchmark",
        metavar="LABELS",
        help="the labels (comma-separated) whose values make a run the previous one of another (default benchmark)",
    )
    parser.add_argument(
        "--state-dir",
        default=DEFAULT_STATE,
        metavar="DIR",
        help=f"where the alerts sent are recorded, so that each is sent once (default {DEFAULT_STATE})",
    )
    parser.add_argument(
        "--history",
        action="store_true",
        help="at a first start (empty state dir), send the alerts of what the topics already hold too",
    )
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from worker.commands.alerts import checked_rules, run_alerts
    from worker.webhook import checked_url

    url = checked_url(args.webhook, "--webhook")
    rules = checked_rules(args.dead_trials, args.min_trials, args.match)
    state = Path(args.state_dir).expanduser() / settings_of(args).app_id
    asyncio.run(run_alerts(settings_of(args), url, rules, state, history=args.history))
    return 0
