"""`evalstream broker start|stop|status`: a local single-node Kafka broker (`worker.local.broker`)."""

from __future__ import annotations

import argparse

from worker.commands.cli.arguments import Commands, command
from worker.local import broker_flags


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "broker",
        "a local single-node Kafka broker (KRaft)",
        "evalstream broker start --port 9092",
        handle,
    )
    broker_flags.add_arguments(parser)


def handle(args: argparse.Namespace) -> int:
    from worker.local import broker  # the dev broker's code, loaded only for this command

    return broker.run(args)
