"""The `evalstream` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from aiokafka.errors import KafkaConnectionError

from events.schema import write_schemas
from worker.commands.digest import digest
from worker.commands.importing import SOURCES
from worker.commands.replay import replay
from worker.local import broker
from worker.settings import Settings


def _replay(args: argparse.Namespace) -> int:
    source = args.path
    try:
        stream = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    except OSError as error:
        print(
            f"evalstream replay: cannot read {source}: {error.strerror}; pass a JSONL file or - for stdin",
            file=sys.stderr,
        )
        return 2
    with stream:
        try:
            stats = replay(
                stream,
                sys.stdout.buffer,
                sys.stderr,
                progress_every=args.progress_every if args.progress else None,
                jobs=args.jobs,
            )
        except OSError as error:
            print(f"evalstream replay: reading {source} failed: {error}", file=sys.stderr)
            return 2
    sys.stdout.flush()
    print(
        f"evalstream replay: {stats.lines} lines, {stats.applied} events applied, "
        f"{stats.redeliveries} redeliveries, {stats.ignored} ignored, {stats.skipped} skipped, "
        f"{stats.summaries} summaries, {stats.open_runs} runs still open",
        file=sys.stderr,
    )
    return 0


def _digest(args: argparse.Namespace) -> int:
    with sys.stdin.buffer if args.path == "-" else open(args.path, "rb") as stream:
        digest(stream, sys.stdout)
    return 0


def _settings(args: argparse.Namespace) -> Settings:
    return Settings().with_overrides(**vars(args))


def _worker(args: argparse.Namespace) -> int:
    import faust

    from worker.runtime.app import build_app, wipe_local_state
    from worker.runtime.topics import ensure_topics

    settings = _settings(args)
    created = asyncio.run(ensure_topics(settings))
    if created:
        print(f"created topics: {', '.join(created)}", flush=True)
    # faust leaves logging alone (override_logging=False); without a handler only warnings show.
    level = {"warn": "WARNING", "crit": "CRITICAL"}.get(args.loglevel, args.loglevel.upper())
    logging.basicConfig(level=level, format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s")
    app = build_app(settings)
    wipe_local_state(app)
    faust.Worker(app, loglevel=args.loglevel, override_logging=False).execute_from_commandline()
    return 0


def _publish(args: argparse.Namespace) -> int:
    from worker.commands.clients import publish
    from worker.runtime.topics import ensure_topics

    settings = _settings(args)
    asyncio.run(ensure_topics(settings))
    with sys.stdin.buffer if args.path == "-" else open(args.path, "rb") as stream:
        sent = asyncio.run(publish(settings, stream))
    print(f"published {sent} messages to {settings.events_topic} at {settings.bootstrap}", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    from events.importers.source import ImportOptions, SourceError
    from worker.commands.importing import import_lines

    if args.as_recorded and args.source != "nemo":
        print(f"evalstream import {args.source}: --as-recorded is for NeMo bundles only", file=sys.stderr)
        return 2
    lines = import_lines(args.source, Path(args.path), ImportOptions(run_id=args.run_id, as_recorded=args.as_recorded))
    try:
        if args.publish:
            from worker.commands.clients import publish
            from worker.runtime.topics import ensure_topics

            settings = _settings(args)
            asyncio.run(ensure_topics(settings))
            sent = asyncio.run(publish(settings, lines))
            print(f"published {sent} events to {settings.events_topic} at {settings.bootstrap}", file=sys.stderr)
        else:
            out = sys.stdout.buffer
            for line in lines:
                out.write(line + b"\n")
            out.flush()
    except SourceError as error:
        print(f"evalstream import {args.source}: {error}", file=sys.stderr)
        return 2
    return 0


def _follow(args: argparse.Namespace) -> int:
    from events.importers.source import ImportOptions, SourceError
    from worker.commands.follow import follow_harbor
    from worker.runtime.topics import ensure_topics

    path = Path(args.path)
    if not path.is_dir():
        print(
            f"evalstream follow {args.source}: {path}: no such directory; pass the job directory "
            "`harbor run` is writing (jobs/<job_name>)",
            file=sys.stderr,
        )
        return 2
    settings = _settings(args)
    asyncio.run(ensure_topics(settings))
    try:
        sent = asyncio.run(
            follow_harbor(settings, path, ImportOptions(run_id=args.run_id), interval=args.interval, log=sys.stderr)
        )
    except SourceError as error:
        print(f"evalstream follow {args.source}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    print(f"job done: published {sent} events to {settings.events_topic} at {settings.bootstrap}", file=sys.stderr)
    return 0


def _summaries(args: argparse.Namespace) -> int:
    from worker.commands.clients import read_summaries

    asyncio.run(read_summaries(_settings(args), sys.stdout.buffer, follow=args.follow, run_id=args.run))
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from worker.commands.simulate import simulate
    from worker.runtime.topics import ensure_topics

    settings = _settings(args)
    asyncio.run(ensure_topics(settings))
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


def _watch(args: argparse.Namespace) -> int:
    from worker.commands.watch import watch

    try:
        asyncio.run(watch(_settings(args), args.run_id, until_closed=not args.forever))
    except KeyboardInterrupt:
        return 130
    return 0


def _connection_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--bootstrap", help="Kafka bootstrap servers (env EVALSTREAM_BOOTSTRAP, default 127.0.0.1:9092)"
    )
    command.add_argument("--events-topic", help="env EVALSTREAM_EVENTS_TOPIC (default evalstream.events)")
    command.add_argument("--summaries-topic", help="env EVALSTREAM_SUMMARIES_TOPIC (default evalstream.summaries)")
    command.add_argument("--progress-topic", help="env EVALSTREAM_PROGRESS_TOPIC (default evalstream.progress)")
    command.add_argument("--deadletter-topic", help="env EVALSTREAM_DEADLETTER_TOPIC (default evalstream.deadletter)")
    command.add_argument(
        "--partitions", type=int, help="partitions of the topics it creates (env EVALSTREAM_PARTITIONS)"
    )


def _schema(args: argparse.Namespace) -> int:
    for path in write_schemas(Path(args.directory)):
        print(path)
    return 0


def _import_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    import_cmd = commands.add_parser(
        "import",
        help="a harness's results (Harbor job, Inspect log, NeMo bundle) as a JSONL event log on stdout",
        description="Read a harness's results and write them as a v1 event log (JSON Lines) on stdout, "
        "or send them to the events topic with --publish. Importing twice is a harmless redelivery.",
        epilog="example: evalstream import harbor jobs/2026-12-01__10-00-00 | evalstream replay -",
    )
    import_cmd.add_argument("source", choices=sorted(SOURCES), help="what PATH holds")
    import_cmd.add_argument("path", help="a Harbor job directory, an Inspect .eval/.json log, a NeMo bundle directory")
    import_cmd.add_argument("--run-id", help="use this run id instead of the one derived from the source")
    import_cmd.add_argument(
        "--as-recorded", action="store_true", help="nemo: keep every score exactly as the bundle has it"
    )
    import_cmd.add_argument("--publish", action="store_true", help="send the events to the events topic instead")
    _connection_flags(import_cmd)
    import_cmd.set_defaults(handler=_import)


def _follow_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from worker.commands.follow import DEFAULT_INTERVAL

    follow_cmd = commands.add_parser(
        "follow",
        help="publish a running Harbor job's trials as they end, and close its runs when it is done",
        description="Watch a Harbor job directory while `harbor run` writes it: each trial's events go to the "
        "events topic as its result.json appears, each run's run.started and run.closed when the job's "
        "result.json says it finished. Restarting it is harmless (the same event ids).",
        epilog="example: evalstream follow harbor jobs/2026-12-01__10-00-00 & evalstream watch "
        "2026-12-01__10-00-00:oracle__my-tasks",
    )
    follow_cmd.add_argument("source", choices=["harbor"], help="what JOB_DIR is")
    follow_cmd.add_argument("path", metavar="JOB_DIR", help="the job directory (jobs/<job_name>)")
    follow_cmd.add_argument("--run-id", help="use this run id instead of the one derived from the job")
    follow_cmd.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"how often to look at the directory (default {DEFAULT_INTERVAL})",
    )
    _connection_flags(follow_cmd)
    follow_cmd.set_defaults(handler=_follow)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="evalstream", description="Live, exact, replayable eval run summaries.")
    commands = root.add_subparsers(dest="command", required=True)

    replay_cmd = commands.add_parser("replay", help="fold a JSONL event log and print the run.summary events")
    replay_cmd.add_argument("path", help="a JSON Lines event log, or - for stdin")
    replay_cmd.add_argument("--progress", action="store_true", help="also print run.progress events")
    replay_cmd.add_argument(
        "--progress-every",
        type=int,
        default=1,
        metavar="N",
        help="with --progress: one every N applied events of a run (default 1)",
    )
    replay_cmd.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="fold the runs in N processes (default: one per CPU); the output is the same for any N",
    )
    replay_cmd.set_defaults(handler=_replay)

    digest_cmd = commands.add_parser("digest", help="print run.summary/run.progress JSON lines for people")
    digest_cmd.add_argument("path", nargs="?", default="-", help="JSON lines (default: stdin)")
    digest_cmd.set_defaults(handler=_digest)

    worker_cmd = commands.add_parser("worker", help="run the worker: events in, progress and summaries out")
    _connection_flags(worker_cmd)
    worker_cmd.add_argument("--web-port", type=int, help="env EVALSTREAM_WEB_PORT (default 6066)")
    worker_cmd.add_argument("--data-dir", type=Path, help="env EVALSTREAM_DATA_DIR")
    worker_cmd.add_argument("--loglevel", default="info")
    worker_cmd.set_defaults(handler=_worker)

    publish_cmd = commands.add_parser("publish", help="publish a JSONL event log to the events topic, keyed by run_id")
    publish_cmd.add_argument("path", help="a JSON Lines event log, or - for stdin")
    _connection_flags(publish_cmd)
    publish_cmd.set_defaults(handler=_publish)

    _import_parser(commands)
    _follow_parser(commands)

    summaries_cmd = commands.add_parser("summaries", help="print the run.summary records of the summaries topic")
    summaries_cmd.add_argument("--follow", action="store_true", help="keep printing new summaries")
    summaries_cmd.add_argument("--run", help="only this run_id")
    _connection_flags(summaries_cmd)
    summaries_cmd.set_defaults(handler=_summaries)

    simulate_cmd = commands.add_parser("simulate", help="publish a synthetic eval run live (the demo's data)")
    simulate_cmd.add_argument("--run-id", default="demo-run")
    simulate_cmd.add_argument("--tasks", type=int, default=30)
    simulate_cmd.add_argument("--attempts", type=int, default=5, help="trials per task")
    simulate_cmd.add_argument("--pace", type=float, default=100.0, help="events per second")
    simulate_cmd.add_argument("--trial-failure-rate", type=float, default=0.05)
    simulate_cmd.add_argument("--metric-failure-rate", type=float, default=0.02)
    simulate_cmd.add_argument("--seed", type=int, default=0)
    _connection_flags(simulate_cmd)
    simulate_cmd.set_defaults(handler=_simulate)

    watch_cmd = commands.add_parser("watch", help="a live terminal view of one run")
    watch_cmd.add_argument("run_id")
    watch_cmd.add_argument("--forever", action="store_true", help="keep watching after the run closes")
    _connection_flags(watch_cmd)
    watch_cmd.set_defaults(handler=_watch)

    schema_cmd = commands.add_parser("schema", help="write a JSON Schema per event type into DIR")
    schema_cmd.add_argument("directory", metavar="DIR")
    schema_cmd.set_defaults(handler=_schema)

    broker_cmd = commands.add_parser(
        "broker", add_help=False, help="a local single-node Kafka broker: start|stop|status [--port N]"
    )
    broker_cmd.add_argument("args", nargs=argparse.REMAINDER)
    broker_cmd.set_defaults(handler=lambda args: broker.main(args.args))
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except KafkaConnectionError:
        bootstrap = _settings(args).bootstrap
        print(
            f"evalstream {args.command}: cannot reach a Kafka broker at {bootstrap} (the connection failed). "
            "Start one with `evalstream broker start`, or point --bootstrap (or EVALSTREAM_BOOTSTRAP) "
            "at a running cluster.",
            file=sys.stderr,
        )
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
