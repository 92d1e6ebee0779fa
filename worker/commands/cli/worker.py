"""`evalstream worker`: the stream processor, events in, progress and summaries out."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from worker.commands import redact, worker_log
from worker.commands.cli.arguments import Commands, command, connection_flags, settings_of
from worker.failure import ENVIRONMENT, CommandError


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "worker",
        "run the worker: events in, progress and summaries out",
        "evalstream worker --bootstrap kafka:9092 --data-dir /var/lib/evalstream",
        handle,
    )
    connection_flags(parser)
    parser.add_argument(
        "--web-host", help="where /ready, /live and /metrics listen (env EVALSTREAM_WEB_HOST, default 127.0.0.1)"
    )
    parser.add_argument("--web-port", type=int, help="env EVALSTREAM_WEB_PORT (default 6066)")
    parser.add_argument("--data-dir", type=Path, help="env EVALSTREAM_DATA_DIR")
    parser.add_argument(
        "--instance-id", help="the worker's stable name in its group, e.g. its pod's (env EVALSTREAM_INSTANCE_ID)"
    )
    parser.add_argument("--loglevel", default="info", choices=("debug", "info", "warn", "error", "crit"))


def handle(args: argparse.Namespace) -> int:
    import faust

    from worker.runtime.allocator import hold_mmap_threshold
    from worker.runtime.app import build_app
    from worker.runtime.collector import quiet_collector
    from worker.runtime.permissions import PermissionsMissing, check_permissions
    from worker.runtime.topics import TopicsUnsafe, check_topics, ensure_topics

    settings = settings_of(args)
    created = asyncio.run(ensure_topics(settings))
    if created:
        print(f"created topics: {', '.join(created)}", flush=True)
    try:
        asyncio.run(check_topics(settings))
    except TopicsUnsafe as error:
        raise CommandError(f"the worker's stored state is not safe: {error}", ENVIRONMENT) from None
    try:
        asyncio.run(check_permissions(settings))
    except PermissionsMissing as error:
        raise CommandError(f"the worker may not do its work: {error}", ENVIRONMENT) from None
    # faust leaves logging alone (override_logging=False); without a handler only warnings show.
    worker_log.setup({"warn": "WARNING", "crit": "CRITICAL"}.get(args.loglevel, args.loglevel.upper()))
    redact.install(settings.secrets())  # aiokafka's debug log holds the SASL handshake's bytes
    logging.getLogger("aiokafka").setLevel(logging.NOTSET)
    stopped: list[BaseException] = []
    app = build_app(settings, stopped)
    quiet_collector()
    hold_mmap_threshold()
    worker = faust.Worker(app, loglevel=args.loglevel, override_logging=False)
    worker.spinner = None  # its cursor codes would go into the log; faust logs "Ready" instead
    try:
        worker.execute_from_commandline()
    except SystemExit:
        if stopped:
            raise CommandError(str(stopped[0]), ENVIRONMENT) from None
        raise
    return 0
