"""`evalstream simulate`: a synthetic run published live (the demo's data)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from worker.commands.cli.arguments import Commands, command, connection_flags, positive, publishing_settings


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "simulate",
        "publish a synthetic eval run live (the demo's data)",
        "evalstream simulate --run-id demo --tasks 30 --attempts 5 --pace 100",
        handle,
    )
    parser.add_argument("--run-id", default="demo-run")
    parser.add_argument("--tasks", type=positive, default=30)
    parser.add_argument("--attempts", type=positive, default=5, help="trials per task")
    parser.add_argument("--pace", type=float, default=100.0, help="events per second")
    parser.add_argument("--trial-failure-rate", type=float, default=0.05)
    parser.add_argument("--metric-failure-rate", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from worker.commands.simulate import simulate

    settings = publishing_settings(args)
    sent = asyncio.run(
        simulate(
            settings,
            args.run_id,
            tasks=args.tasks,
            attempts=args.attempts,
            pace=args.pace,
            trial_failure_rate=args.trial_failure_rate,
            metric_failure_rate=args.metric_failure_rate,
            seed=args.seed,
        )
    )
    print(f"simulated run {args.run_id!r}: {sent} events published to {settings.events_topic}", file=sys.stderr)
    return 0
