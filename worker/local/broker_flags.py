"""The flags of `evalstream broker`, apart from the broker itself, so that the CLI builds its
parser without loading the broker's provisioning code."""

from __future__ import annotations

import argparse

DEFAULT_PORT = 9092
SECURE_PORT = 9094


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument(
        "--port",
        type=int,
        help=f"client port (default {DEFAULT_PORT}; with --secure {SECURE_PORT}); each port's broker has its own state",
    )
    parser.add_argument("--controller-port", type=int, help="default: port + 1")
    parser.add_argument("--timeout", type=float, help="seconds (start 60, stop 30)")
    parser.add_argument(
        "--secure",
        action="store_true",
        help="the secured broker: SASL_SSL (SCRAM-SHA-512/256, PLAIN) with client certificates, users worker, "
        "producer and reader with ACLs; its state in secure-<port>/ of the state dir, each user's settings in "
        "<user>.env",
    )
