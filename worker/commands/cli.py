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
from worker.commands.replay import ReplayStats, replay
from worker.local import broker
from worker.settings import Settings


def _replay(args: argparse.Namespace) -> int:
    progress_every = args.progress_every if args.progress else None
    if args.from_topic:
        return _replay_topic(args, progress_every)
    if args.run is not None:
        print("evalstream replay: --run is for --from-topic; to replay one run of a file, filter it", file=sys.stderr)
        return 2
    source = args.path
    if source is None:
        print("evalstream replay: pass a JSONL file, - for stdin, or --from-topic", file=sys.stderr)
        return 2
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
                progress_every=progress_every,
                jobs=args.jobs,
            )
        except OSError as error:
            print(f"evalstream replay: reading {source} failed: {error}", file=sys.stderr)
            return 2
    _replayed(stats, "lines")
    return 0


def _replay_topic(args: argparse.Namespace, progress_every: int | None) -> int:
    from events.reader import TopicMissing
    from worker.commands.clients import replay_topic

    settings = _settings(args)
    if args.path is not None:
        print("evalstream replay: give a file or --from-topic, not both", file=sys.stderr)
        return 2
    try:
        stats = asyncio.run(
            replay_topic(settings, sys.stdout.buffer, sys.stderr, run_id=args.run, progress_every=progress_every)
        )
    except TopicMissing:
        print(
            f"evalstream replay: no topic {settings.events_topic!r} at {settings.bootstrap}; "
            "check --events-topic (or EVALSTREAM_EVENTS_TOPIC)",
            file=sys.stderr,
        )
        return 1
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


def _gate(args: argparse.Namespace) -> int:
    from worker.commands.gate import GateError, Options, run

    options = Options(keys=args.key, threshold=args.threshold, max_regressions=args.max_regressions, as_json=args.json)
    try:
        return run(args.baseline, args.candidate, from_file=args.from_file, settings=_settings(args), options=options)
    except GateError as error:
        print(f"evalstream gate: {error}", file=sys.stderr)
        return error.code


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


def _replay_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay_cmd = commands.add_parser("replay", help="fold a JSONL event log and print the run.summary events")
    replay_cmd.add_argument("path", nargs="?", help="a JSON Lines event log, or - for stdin")
    replay_cmd.add_argument(
        "--from-topic",
        action="store_true",
        help="fold the events topic itself (as it stands now) instead of a file; no worker, no state touched",
    )
    replay_cmd.add_argument("--run", metavar="ID", help="with --from-topic: only this run")
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
    _connection_flags(replay_cmd)
    replay_cmd.set_defaults(handler=_replay)


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


def _gate_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gate_cmd = commands.add_parser(
        "gate",
        help="compare two runs' latest summaries, task by task, and fail (exit 3) on a significant drop",
        description="Compare CANDIDATE with BASELINE on the tasks both have, per pass@k key: per-task pass rates, "
        "their paired difference with a 95%% interval (tasks as the unit), pass@k of both, verdicts that changed. "
        "Exit codes: 0 passed, 1 broker or summaries topic not there, 2 bad usage or input, 3 gate failed.",
        epilog="example: evalstream gate run-main run-pr-42 --max-regressions 2",
    )
    gate_cmd.add_argument("baseline", help="run id of the baseline (e.g. the main branch's run)")
    gate_cmd.add_argument("candidate", help="run id of the candidate (the change under test)")
    gate_cmd.add_argument(
        "--from-file", metavar="PATH", help="read summaries JSONL (as `evalstream replay` prints; - for stdin)"
    )
    gate_cmd.add_argument(
        "--key", action="append", help="a pass@k key to compare, e.g. reward.score (repeatable; default: all shared)"
    )
    gate_cmd.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        help="drop tolerated: fail when the interval's upper bound is below -THRESHOLD (default 0)",
    )
    gate_cmd.add_argument(
        "--max-regressions", type=int, metavar="N", help="fail when a key has more than N tasks that got worse"
    )
    gate_cmd.add_argument("--json", action="store_true", help="print the comparison as JSON instead of a table")
    _connection_flags(gate_cmd)
    gate_cmd.set_defaults(handler=_gate)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="evalstream", description="Live, exact, replayable eval run summaries.")
    commands = root.add_subparsers(dest="command", required=True)

    _replay_parser(commands)

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
    _gate_parser(commands)

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
