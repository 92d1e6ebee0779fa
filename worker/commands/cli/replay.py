"""`evalstream replay`: a log (or the events topic) folded, its output events printed."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from projections.closed_caches import CLOSED_CACHES_BYTES
from worker.commands.cli.arguments import EVENT_LOG, Commands, command, connection_flags, natural, positive, settings_of
from worker.failure import ENVIRONMENT, CommandError, opened

if TYPE_CHECKING:
    from projections.replayer import ReplayStats


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "replay",
        "fold a JSONL event log (or the events topic) and print the run.summary events",
        "evalstream replay log.jsonl | evalstream digest",
        handle,
    )
    parser.add_argument("path", nargs="?", help="a JSON Lines event log, or - for stdin")
    parser.add_argument(
        "--from-topic",
        action="store_true",
        help="fold the events topic itself (as it stands now) instead of a file; no worker, no state touched",
    )
    parser.add_argument("--run", metavar="ID", help="with --from-topic: only this run (exit 1 when it has no event)")
    parser.add_argument("--progress", action="store_true", help="also print run.progress events")
    parser.add_argument(
        "--progress-every",
        type=positive,
        default=1,
        metavar="N",
        help="with --progress: one every N applied events of a run (default 1)",
    )
    parser.add_argument(
        "--jobs",
        type=positive,
        default=1,
        metavar="N",
        help="fold the runs in N processes (default 1; worth it for logs of many runs, as a run cannot be "
        "split); the output is the same for any N",
    )
    parser.add_argument(
        "--closed-caches-mb",
        type=natural,
        default=CLOSED_CACHES_BYTES // 2**20,
        metavar="N",
        help="most memory, in MiB by its estimate, of the summary caches kept for closed runs, per process "
        f"(default {CLOSED_CACHES_BYTES // 2**20}); past it the least recently revised run's is dropped, and its "
        "next late event recomputes its summary in full: less memory, slower late revisions, the same output",
    )
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    progress_every = args.progress_every if args.progress else None
    if args.from_topic:
        if args.path is not None:
            raise CommandError("give a file or --from-topic, not both")
        return _from_topic(args, progress_every)
    if args.run is not None:
        raise CommandError("--run is for --from-topic; to replay one run of a file, filter the file")
    if args.path is None:
        raise CommandError(f"pass {EVENT_LOG}, - for stdin, or --from-topic")
    from worker.commands.replay import replay
    from worker.runtime.collector import quiet_collector

    quiet_collector()  # as in the worker: the runs' state has no cycles for full collections to find
    with opened(args.path, EVENT_LOG) as stream:
        try:
            stats = replay(
                stream,
                sys.stdout.buffer,
                sys.stderr,
                progress_every=progress_every,
                jobs=args.jobs,
                closed_caches_bytes=args.closed_caches_mb * 2**20,
            )
        except BrokenPipeError:
            raise  # a write to an output whose reader has gone (`main` ends quietly), not a read
        except OSError as error:
            raise CommandError(f"reading {args.path} failed: {error}") from None
    _replayed(stats, "lines")
    return 0


def _from_topic(args: argparse.Namespace, progress_every: int | None) -> int:
    from worker.commands.clients import replay_topic

    settings = settings_of(args)
    stats = asyncio.run(
        replay_topic(
            settings,
            sys.stdout.buffer,
            sys.stderr,
            run_id=args.run,
            progress_every=progress_every,
            closed_caches_bytes=args.closed_caches_mb * 2**20,
        )
    )
    if args.run is not None and not (stats.applied or stats.redeliveries or stats.ignored or stats.skipped):
        raise CommandError(
            f"no event of run {args.run!r} in topic {settings.events_topic!r} at {settings.bootstrap} "
            f"({stats.lines} records read); check the run id (`evalstream summaries` prints the closed runs, "
            "the dashboard lists every run)",
            ENVIRONMENT,
        )
    _replayed(stats, f"records of {settings.events_topic}")
    return 0


def _replayed(stats: ReplayStats, what: str) -> None:
    sys.stdout.flush()
    print(
        f"evalstream replay: {stats.lines} {what}, {stats.applied} events applied, "
        f"{stats.redeliveries} redeliveries, {stats.ignored} ignored, {stats.skipped} skipped, "
        f"{stats.summaries} summaries, {stats.open_runs} runs still open",
        file=sys.stderr,
    )
