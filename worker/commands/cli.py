"""The `evalstream` command line.

Every command fails the same way (`worker.failure`): a sentence on stderr after
the command's name, exit code 2 for bad usage or input and 1 for an environment that is
not there, and no traceback unless `--debug` (or EVALSTREAM_DEBUG=1) asks for one. A command
whose output's reader has gone (`| head`) stops there, quietly, exit 0
(`worker.commands.closed_output`).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeAlias

from aiokafka.errors import KafkaConnectionError, KafkaError

from events.clients.security import SecurityError
from events.importers.source import SourceError
from events.schema import write_schemas
from projections.closed_caches import CLOSED_CACHES_BYTES
from projections.replayer import ReplayStats
from worker.commands import redact, worker_log
from worker.commands.closed_output import CLOSED, reader_gone
from worker.commands.digest import digest
from worker.commands.importing import SOURCES
from worker.commands.refused import refusal
from worker.commands.replay import replay
from worker.failure import ENVIRONMENT, USAGE, CommandError, opened, topic_missing, unreachable
from worker.local import broker_flags
from worker.settings import Settings

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler = Callable[[argparse.Namespace], int]
EVENT_LOG = "a JSONL event log"


def _settings(args: argparse.Namespace) -> Settings:
    return Settings().with_overrides(**vars(args))


def _replay(args: argparse.Namespace) -> int:
    progress_every = args.progress_every if args.progress else None
    if args.from_topic:
        if args.path is not None:
            raise CommandError("give a file or --from-topic, not both")
        return _replay_topic(args, progress_every)
    if args.run is not None:
        raise CommandError("--run is for --from-topic; to replay one run of a file, filter the file")
    if args.path is None:
        raise CommandError(f"pass {EVENT_LOG}, - for stdin, or --from-topic")
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


def _replay_topic(args: argparse.Namespace, progress_every: int | None) -> int:
    from worker.commands.clients import replay_topic

    settings = _settings(args)
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


def _digest(args: argparse.Namespace) -> int:
    with opened(args.path, "JSON lines of run.summary or run.progress events") as stream:
        digest(stream, sys.stdout, "stdin" if args.path == "-" else args.path)
    return 0


def _worker(args: argparse.Namespace) -> int:
    import faust

    from worker.runtime.app import build_app
    from worker.runtime.collector import quiet_collector
    from worker.runtime.topics import TopicsUnsafe, check_topics, ensure_topics

    settings = _settings(args)
    created = asyncio.run(ensure_topics(settings))
    if created:
        print(f"created topics: {', '.join(created)}", flush=True)
    try:
        asyncio.run(check_topics(settings))
    except TopicsUnsafe as error:
        raise CommandError(f"the worker's stored state is not safe: {error}", ENVIRONMENT) from None
    # faust leaves logging alone (override_logging=False); without a handler only warnings show.
    worker_log.setup({"warn": "WARNING", "crit": "CRITICAL"}.get(args.loglevel, args.loglevel.upper()))
    redact.install(settings.secrets())  # aiokafka's debug log holds the SASL handshake's bytes
    logging.getLogger("aiokafka").setLevel(logging.NOTSET)
    stopped: list[BaseException] = []
    app = build_app(settings, stopped)
    quiet_collector()
    worker = faust.Worker(app, loglevel=args.loglevel, override_logging=False)
    worker.spinner = None  # its cursor codes would go into the log; faust logs "Ready" instead
    try:
        worker.execute_from_commandline()
    except SystemExit:
        if stopped:
            raise CommandError(str(stopped[0]), ENVIRONMENT) from None
        raise
    return 0


def _publish(args: argparse.Namespace) -> int:
    from worker.commands.checked import checked
    from worker.commands.clients import publish
    from worker.runtime.topics import ensure_topics

    settings = _settings(args)
    with opened(args.path, EVENT_LOG) as stream:
        log = checked(stream, sys.stderr, skip_invalid=args.skip_invalid)  # before any broker is asked
        asyncio.run(ensure_topics(settings, needed=[settings.events_topic]))
        sent = asyncio.run(publish(settings, log.lines))
    skipped = f" ({log.invalid} invalid lines skipped)" if log.invalid else ""
    print(f"published {sent} messages to {settings.events_topic} at {settings.bootstrap}{skipped}", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    from events.importers.source import ImportOptions
    from worker.commands.importing import import_lines

    if args.as_recorded and args.source != "nemo":
        raise CommandError("--as-recorded is for NeMo bundles only")
    lines = import_lines(args.source, Path(args.path), ImportOptions(run_id=args.run_id, as_recorded=args.as_recorded))
    # The first event is read before any broker is asked, so that a wrong path is told as such.
    lines = itertools.chain([first] if (first := next(lines, None)) is not None else [], lines)
    if args.publish:
        from worker.commands.clients import publish
        from worker.runtime.topics import ensure_topics

        settings = _settings(args)
        asyncio.run(ensure_topics(settings, needed=[settings.events_topic]))
        sent = asyncio.run(publish(settings, lines))
        print(f"published {sent} events to {settings.events_topic} at {settings.bootstrap}", file=sys.stderr)
    else:
        out = sys.stdout.buffer
        for line in lines:
            out.write(line + b"\n")
        out.flush()
    return 0


def _follow(args: argparse.Namespace) -> int:
    from events.importers.source import ImportOptions
    from worker.commands.follow import follow_harbor
    from worker.runtime.topics import ensure_topics

    path = Path(args.path)
    if not path.is_dir():
        raise CommandError(f"{path}: no such directory; pass the job directory `harbor run` is writing (jobs/<name>)")
    settings = _settings(args)
    asyncio.run(ensure_topics(settings, needed=[settings.events_topic]))
    sent = asyncio.run(
        follow_harbor(settings, path, ImportOptions(run_id=args.run_id), interval=args.interval, log=sys.stderr)
    )
    print(f"job done: published {sent} events to {settings.events_topic} at {settings.bootstrap}", file=sys.stderr)
    return 0


def _summaries(args: argparse.Namespace) -> int:
    from worker.commands.clients import read_summaries

    settings = _settings(args)
    count = asyncio.run(read_summaries(settings, sys.stdout.buffer, follow=args.follow, run_id=args.run))
    if args.run is not None and not count:
        raise CommandError(
            f"no summary of run {args.run!r} in topic {settings.summaries_topic!r} at {settings.bootstrap}; "
            "a run has one once its run.closed is applied (`evalstream watch` shows runs still open)",
            ENVIRONMENT,
        )
    return 0


def _gate(args: argparse.Namespace) -> int:
    from worker.commands.gate import Options, run

    options = Options(
        keys=args.key,
        threshold=args.threshold,
        max_regressions=args.max_regressions,
        as_json=args.json,
        fail_on=frozenset(args.fail_on),
        report_format=args.format,
        report=args.report,
    )
    if args.live:
        from worker.commands.gate_live import run_live

        return run_live(
            args.baseline,
            args.candidate,
            from_file=args.from_file,
            settings=_settings(args),
            options=options,
            timeout=args.timeout,
        )
    if args.timeout is not None:
        raise CommandError("--timeout bounds the wait of --live; without --live the gate does not wait")
    return run(args.baseline, args.candidate, from_file=args.from_file, settings=_settings(args), options=options)


def _export_mlflow(args: argparse.Namespace) -> int:
    from worker.commands import export

    uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        raise CommandError("name the MLflow tracking server: --tracking-uri URI, or MLFLOW_TRACKING_URI")
    try:
        from worker.export.to_mlflow import MlflowSink
    except ImportError:
        raise CommandError("the MLflow client is not installed: pip install 'evalstream[mlflow]'") from None
    settings = _settings(args)
    return export.run(
        lambda: MlflowSink(uri, experiment=args.experiment, experiment_label=args.experiment_label),
        settings=settings,
        group=export.group_of(settings, "mlflow", args.group),
        follow=args.follow,
        from_file=args.from_file,
    )


def _export_parquet(args: argparse.Namespace) -> int:
    from worker.commands import export

    try:
        from worker.export.to_parquet import ParquetSink, partition_column
    except ImportError:
        raise CommandError("pyarrow is not installed: pip install 'evalstream[parquet]'") from None
    try:
        partition_column(args.partition_by)
    except ValueError as error:
        raise CommandError(str(error)) from None
    settings = _settings(args)
    return export.run(
        lambda: ParquetSink(Path(args.out), args.partition_by),
        settings=settings,
        group=export.group_of(settings, "parquet", args.group),
        follow=args.follow,
        from_file=args.from_file,
    )


def _history(args: argparse.Namespace) -> int:
    from worker.commands.history import run

    return run(args.label, args.task, from_file=args.from_file, settings=_settings(args), as_json=args.json)


def _retry(args: argparse.Namespace) -> int:
    from worker.commands.retry import run

    return run(
        args.run_id, from_file=args.from_file, attempts_per_task=args.attempts_per_task, settings=_settings(args)
    )


def _simulate(args: argparse.Namespace) -> int:
    from worker.commands.simulate import simulate
    from worker.runtime.topics import ensure_topics

    settings = _settings(args)
    asyncio.run(ensure_topics(settings, needed=[settings.events_topic]))
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

    asyncio.run(watch(_settings(args), args.run_id, until_closed=not args.forever, timeout=args.timeout))
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    from worker.dashboard.service import serve

    settings = _settings(args)
    asyncio.run(serve(settings, settings.dashboard_host, settings.dashboard_port))
    return 0


def _schema(args: argparse.Namespace) -> int:
    try:
        written = write_schemas(Path(args.directory))
    except OSError as error:
        raise CommandError(f"cannot write into {args.directory}: {error.strerror or error}") from None
    for path in written:
        print(path)
    return 0


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def natural(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _connection_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--bootstrap",
        help="Kafka bootstrap servers (env EVALSTREAM_BOOTSTRAP, default 127.0.0.1:9092); a secured cluster's TLS "
        'and SASL settings come from EVALSTREAM_SECURITY_PROTOCOL, _SASL_* and _SSL_* (README, "Secured clusters")',
    )
    command.add_argument("--events-topic", help="env EVALSTREAM_EVENTS_TOPIC (default evalstream.events)")
    command.add_argument("--summaries-topic", help="env EVALSTREAM_SUMMARIES_TOPIC (default evalstream.summaries)")
    command.add_argument("--progress-topic", help="env EVALSTREAM_PROGRESS_TOPIC (default evalstream.progress)")
    command.add_argument("--deadletter-topic", help="env EVALSTREAM_DEADLETTER_TOPIC (default evalstream.deadletter)")
    command.add_argument(
        "--partitions", type=positive, help="partitions of the topics it creates (env EVALSTREAM_PARTITIONS)"
    )


def _command(commands: Commands, name: str, summary: str, example: str, handler: Handler) -> argparse.ArgumentParser:
    """A sub-command with its own --help (ending in an example line) and --debug."""
    command = commands.add_parser(
        name,
        help=summary,
        description=summary[0].upper() + summary[1:] + ".",
        epilog=f"example: {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument(
        "--debug", action="store_true", help="show the traceback of a failure (env EVALSTREAM_DEBUG=1)"
    )
    command.set_defaults(handler=handler)
    return command


def _replay_parser(commands: Commands) -> None:
    command = _command(
        commands,
        "replay",
        "fold a JSONL event log (or the events topic) and print the run.summary events",
        "evalstream replay log.jsonl | evalstream digest",
        _replay,
    )
    command.add_argument("path", nargs="?", help="a JSON Lines event log, or - for stdin")
    command.add_argument(
        "--from-topic",
        action="store_true",
        help="fold the events topic itself (as it stands now) instead of a file; no worker, no state touched",
    )
    command.add_argument("--run", metavar="ID", help="with --from-topic: only this run (exit 1 when it has no event)")
    command.add_argument("--progress", action="store_true", help="also print run.progress events")
    command.add_argument(
        "--progress-every",
        type=positive,
        default=1,
        metavar="N",
        help="with --progress: one every N applied events of a run (default 1)",
    )
    command.add_argument(
        "--jobs",
        type=positive,
        default=1,
        metavar="N",
        help="fold the runs in N processes (default 1; worth it for logs of many runs, as a run cannot be "
        "split); the output is the same for any N",
    )
    command.add_argument(
        "--closed-caches-mb",
        type=natural,
        default=CLOSED_CACHES_BYTES // 2**20,
        metavar="N",
        help="most memory, in MiB by its estimate, of the summary caches kept for closed runs, per process "
        f"(default {CLOSED_CACHES_BYTES // 2**20}); past it the least recently revised run's is dropped, and its "
        "next late event recomputes its summary in full: less memory, slower late revisions, the same output",
    )
    _connection_flags(command)


def _import_parser(commands: Commands) -> None:
    command = _command(
        commands,
        "import",
        "write a harness's results (Harbor job, Inspect log, NeMo bundle) as a JSONL event log on stdout",
        "evalstream import harbor jobs/2026-12-01__10-00-00 | evalstream replay -",
        _import,
    )
    command.add_argument("source", choices=sorted(SOURCES), help="what PATH holds")
    command.add_argument("path", help="a Harbor job directory, an Inspect .eval/.json log, a NeMo bundle directory")
    command.add_argument("--run-id", help="use this run id instead of the one derived from the source")
    command.add_argument(
        "--as-recorded", action="store_true", help="nemo: keep every score exactly as the bundle has it"
    )
    command.add_argument("--publish", action="store_true", help="send the events to the events topic instead")
    _connection_flags(command)


def _follow_parser(commands: Commands) -> None:
    from worker.commands.follow import DEFAULT_INTERVAL

    command = _command(
        commands,
        "follow",
        "publish a running Harbor job's trials as they end, and close its runs when it is done",
        "evalstream follow harbor jobs/2026-12-01__10-00-00 & evalstream watch 2026-12-01__10-00-00:oracle__my-tasks",
        _follow,
    )
    command.description = (
        "Watch a Harbor job directory while `harbor run` writes it: each trial's events go to the events topic as "
        "its result.json appears, each run's run.started and run.closed when the job's result.json says it "
        "finished. Restarting it is harmless (the same event ids)."
    )
    command.add_argument("source", choices=["harbor"], help="what JOB_DIR is")
    command.add_argument("path", metavar="JOB_DIR", help="the job directory (jobs/<job_name>)")
    command.add_argument("--run-id", help="use this run id instead of the one derived from the job")
    command.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"how often to look at the directory (default {DEFAULT_INTERVAL})",
    )
    _connection_flags(command)


def _gate_parser(commands: Commands) -> None:
    command = _command(
        commands,
        "gate",
        "compare two runs' latest summaries task by task, and fail when the candidate did worse",
        "evalstream gate run-main run-pr-42 --max-regressions 2",
        _gate,
    )
    command.description = (
        f"{command.description}\nPer pass@k key, on the tasks both runs have: per-task pass rates, their paired\n"
        "difference with a 95% interval (tasks as the unit), pass@1 and pass@k of both, verdicts that changed.\n\n"
        "Each key is PASS (a drop beyond THRESHOLD ruled out), WARN (a real drop within it), INCONCLUSIVE (the\n"
        "interval holds both 0 and -THRESHOLD; how many more paired tasks would decide is said) or BLOCK (a drop\n"
        "beyond it); the gate is its worst key. The interval: exact sign-flip below 20 paired tasks, Student's t\n"
        "from 20 on.\n\n"
        "exit codes: 0 PASS (and WARN, INCONCLUSIVE unless --fail-on names them); 1 no broker, no summaries\n"
        "topic, or no summary of a run in it yet; 2 bad usage or input; 3 BLOCK; 4 WARN with --fail-on warn;\n"
        "5 INCONCLUSIVE with --fail-on inconclusive\n\n"
        "--live: fold the candidate from the events topic as it runs, on an anytime-valid 95% confidence\n"
        "sequence: exit 3 once a key's lies wholly below -THRESHOLD, 0 (or WARN's) once every key's lies above\n"
        "it, or decide at the candidate's close: evalstream gate --live run-main run-pr-42"
    )
    command.add_argument("baseline", help="run id of the baseline (e.g. the main branch's run)")
    command.add_argument("candidate", help="run id of the candidate (the change under test)")
    command.add_argument(
        "--from-file", metavar="PATH", help="read summaries JSONL (as `evalstream replay` prints; - for stdin)"
    )
    command.add_argument(
        "--key", action="append", help="a pass@k key to compare, e.g. reward.score (repeatable; default: all shared)"
    )
    command.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        help="the drop tolerated: fail when a key's interval lies wholly below -THRESHOLD (default 0)",
    )
    command.add_argument(
        "--max-regressions", type=int, metavar="N", help="fail when a key has more than N tasks that got worse"
    )
    command.add_argument("--json", action="store_true", help="print the comparison as JSON instead of a table")
    command.add_argument(
        "--format",
        choices=("json", "junit", "markdown"),
        help="print this report instead of the table (JUnit XML for CI test views, Markdown for a job summary)",
    )
    command.add_argument(
        "--report",
        metavar="PATH",
        help="write the report (--format, or by the name: .json, .xml, .md) to PATH; the table still prints",
    )
    command.add_argument(
        "--fail-on",
        action="append",
        default=[],
        choices=("warn", "inconclusive"),
        help="exit non-zero on this decision too (warn: 4, inconclusive: 5); repeatable",
    )
    command.add_argument(
        "--live", action="store_true", help="decide while the candidate runs, from the events topic (see above)"
    )
    command.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="with --live: give up (exit 1) if nothing is decided by then"
    )
    _connection_flags(command)


def _export_parser(commands: Commands) -> None:
    export = commands.add_parser(
        "export",
        help="write run summaries to MLflow or Parquet files, from the summaries topic or a file",
        description="Write run summaries where teams look: one MLflow run per run, or Parquet tables. From the "
        "summaries topic (a consumer group of its own, committed records; --follow to keep going) or a summaries "
        "file. Idempotent by (run, revision): a later revision replaces an earlier one, nothing is doubled.\n\n"
        "exit codes: 0 all written; 1 broker, topic or destination unreachable; 2 bad usage or input; "
        "3 some records skipped or runs not written (each named on stderr)",
        epilog="example: evalstream export parquet --out results/ --from-file summaries.jsonl   "
        "(evalstream export SINK --help for each)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sinks = export.add_subparsers(dest="sink", required=True, metavar="SINK")
    mlflow = _command(
        sinks,
        "mlflow",
        "one MLflow run per run, updated as its revisions land",
        "MLFLOW_TRACKING_URI=http://127.0.0.1:5000 evalstream export mlflow --follow --experiment-label benchmark",
        _export_mlflow,
    )
    mlflow.add_argument(
        "--tracking-uri", metavar="URI", help="the MLflow tracking server (default: MLFLOW_TRACKING_URI)"
    )
    mlflow.add_argument("--experiment", default="evalstream", help="the experiment runs go to (default evalstream)")
    mlflow.add_argument(
        "--experiment-label",
        metavar="LABEL",
        help="name each run's experiment by its value of this label (runs without it: --experiment)",
    )
    parquet = _command(
        sinks,
        "parquet",
        "Parquet tables of attempts and figures, a file per run, partitioned by date or a label",
        "evalstream export parquet --out results/ --partition-by label:benchmark",
        _export_parquet,
    )
    parquet.add_argument("--out", required=True, metavar="DIR", help="the directory of the tables")
    parquet.add_argument(
        "--partition-by",
        default="date",
        metavar="date|label:NAME",
        help="directories by the UTC day a run was first published (default), or by a label's value",
    )
    for command in (mlflow, parquet):
        command.add_argument(
            "--from-file", metavar="PATH", help="read summaries JSONL (as `evalstream replay` prints; - for stdin)"
        )
        command.add_argument("--follow", action="store_true", help="keep exporting new revisions as they land")
        command.add_argument(
            "--group", help="the consumer group that holds its place in the topic (default <app id>-export-<sink>)"
        )
        _connection_flags(command)


def _retry_parser(commands: Commands) -> None:
    command = _command(
        commands,
        "retry",
        "list, as JSON lines, the tasks of a run whose attempts are dead or missing, and how many each lacks",
        "evalstream retry run-7 --attempts-per-task 5",
        _retry,
    )
    command.description = (
        f"{command.description}\nOne line per task: {{run_id, task_id, lacks, attempts_per_task, dead_trials, keys}};\n"
        "a harness runs `lacks` more trials of the task. attempts_per_task: --attempts-per-task, else the run's\n"
        "latest run.progress (expected trials / declared tasks), else exit 2."
    )
    command.add_argument("run_id", help="the run whose tasks to list")
    command.add_argument(
        "--from-file", metavar="PATH", help="read summaries JSONL (as `evalstream replay` prints; - for stdin)"
    )
    command.add_argument(
        "--attempts-per-task", type=int, metavar="N", help="the attempts each task should have (default: the run's)"
    )
    _connection_flags(command)


def _client_parsers(commands: Commands) -> None:
    worker = _command(
        commands,
        "worker",
        "run the worker: events in, progress and summaries out",
        "evalstream worker --bootstrap kafka:9092 --data-dir /var/lib/evalstream",
        _worker,
    )
    _connection_flags(worker)
    worker.add_argument(
        "--web-host", help="where /ready, /live and /metrics listen (env EVALSTREAM_WEB_HOST, default 127.0.0.1)"
    )
    worker.add_argument("--web-port", type=int, help="env EVALSTREAM_WEB_PORT (default 6066)")
    worker.add_argument("--data-dir", type=Path, help="env EVALSTREAM_DATA_DIR")
    worker.add_argument(
        "--instance-id", help="the worker's stable name in its group, e.g. its pod's (env EVALSTREAM_INSTANCE_ID)"
    )
    worker.add_argument("--loglevel", default="info", choices=("debug", "info", "warn", "error", "crit"))

    publish = _command(
        commands,
        "publish",
        "publish a JSONL event log to the events topic, keyed by run_id, once every line is a valid event",
        "evalstream publish log.jsonl --bootstrap kafka:9092",
        _publish,
    )
    publish.add_argument("path", help="a JSON Lines event log, or - for stdin")
    publish.add_argument(
        "--skip-invalid",
        action="store_true",
        help="publish the valid lines and report the rest (default: an invalid line publishes nothing, exit 2)",
    )
    _connection_flags(publish)

    summaries = _command(
        commands,
        "summaries",
        "print the run.summary records of the summaries topic",
        "evalstream summaries --run run-7 | evalstream digest",
        _summaries,
    )
    summaries.add_argument("--follow", action="store_true", help="keep printing new summaries")
    summaries.add_argument("--run", help="only this run_id (exit 1 when it has none)")
    _connection_flags(summaries)

    simulate = _command(
        commands,
        "simulate",
        "publish a synthetic eval run live (the demo's data)",
        "evalstream simulate --run-id demo --tasks 30 --attempts 5 --pace 100",
        _simulate,
    )
    simulate.add_argument("--run-id", default="demo-run")
    simulate.add_argument("--tasks", type=positive, default=30)
    simulate.add_argument("--attempts", type=positive, default=5, help="trials per task")
    simulate.add_argument("--pace", type=float, default=100.0, help="events per second")
    simulate.add_argument("--trial-failure-rate", type=float, default=0.05)
    simulate.add_argument("--metric-failure-rate", type=float, default=0.02)
    simulate.add_argument("--seed", type=int, default=0)
    _connection_flags(simulate)

    watch = _command(
        commands, "watch", "a live terminal view of one run", "evalstream watch run-7 --timeout 60", _watch
    )
    watch.add_argument("run_id")
    watch.add_argument("--forever", action="store_true", help="keep watching after the run closes")
    watch.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="give up (exit 1) if the run shows no progress by then"
    )
    _connection_flags(watch)

    history = _command(
        commands,
        "history",
        "a task's verdict and pass rate in each run of a label set, and the tasks whose verdict changed",
        "evalstream history --label benchmark=swe-lite --task django-1234",
        _history,
    )
    history.add_argument(
        "--label", action="append", default=[], metavar="NAME=VALUE", help="only runs with this label (repeatable)"
    )
    history.add_argument("--task", metavar="TASK_ID", help="this task's verdict and pass rate in each run")
    history.add_argument("--json", action="store_true", help="the figures as JSON (what /task?format=json gives)")
    history.add_argument(
        "--from-file", metavar="PATH", help="read summaries JSONL (as `evalstream replay` prints; - for stdin)"
    )
    _connection_flags(history)

    dashboard = _command(
        commands,
        "dashboard",
        "serve a live web page of every run (read-only), from the progress and summaries topics",
        "evalstream dashboard --port 6067   (then open http://127.0.0.1:6067/)",
        _dashboard,
    )
    dashboard.add_argument(
        "--port",
        dest="dashboard_port",
        metavar="PORT",
        type=int,
        help="env EVALSTREAM_DASHBOARD_PORT (default 6067; 0: any free)",
    )
    dashboard.add_argument(
        "--host",
        dest="dashboard_host",
        metavar="HOST",
        help="address to listen on (env EVALSTREAM_DASHBOARD_HOST, default 127.0.0.1: this machine only)",
    )
    dashboard.add_argument(
        "--recent",
        dest="dashboard_recent",
        metavar="RUNS",
        type=positive,
        help="closed runs kept in memory, the last to move (env EVALSTREAM_DASHBOARD_RECENT_RUNS, default 200); "
        "older ones are read back from the summaries topic when a page asks",
    )
    _connection_flags(dashboard)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="evalstream",
        description="Live, exact, replayable eval run summaries.",
        epilog="example: evalstream replay log.jsonl | evalstream digest   (evalstream COMMAND --help for each)",
    )
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _replay_parser(commands)
    digest_cmd = _command(
        commands,
        "digest",
        "print run.summary/run.progress JSON lines for people",
        "evalstream summaries | evalstream digest",
        _digest,
    )
    digest_cmd.add_argument("path", nargs="?", default="-", help="JSON lines (default: stdin)")
    _import_parser(commands)
    _follow_parser(commands)
    _client_parsers(commands)
    _gate_parser(commands)
    _export_parser(commands)
    _retry_parser(commands)
    schema_cmd = _command(
        commands, "schema", "write a JSON Schema per event type into DIR", "evalstream schema schemas/", _schema
    )
    schema_cmd.add_argument("directory", metavar="DIR")
    broker_cmd = _command(
        commands,
        "broker",
        "a local single-node Kafka broker (KRaft)",
        "evalstream broker start --port 9092",
        _broker,
    )
    broker_flags.add_arguments(broker_cmd)
    return root


def _broker(args: argparse.Namespace) -> int:
    from worker.local import broker  # the dev broker's code, loaded only for this command

    return broker.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    debug = args.debug or os.environ.get("EVALSTREAM_DEBUG", "") not in ("", "0")
    if not debug:
        # The clients' own log lines ("Unable connect to ...") would come before our sentence;
        # the worker turns them back on once it runs.
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if isinstance(error, BrokenPipeError) and reader_gone():
            return CLOSED
        if debug:
            raise
        message, code = _explained(error, args)
        print(f"evalstream {args.command}: {message}", file=sys.stderr)
    return code


def _explained(error: Exception, args: argparse.Namespace) -> tuple[str, int]:
    """What to tell the user about `error`, and the exit code."""
    from events.clients.kafka import TopicMissing
    from projections.step import RollbackFailed

    if isinstance(error, CommandError):
        return str(error), error.code
    if isinstance(error, RollbackFailed):
        return f"stopped: {error}", ENVIRONMENT
    if isinstance(error, SourceError | SecurityError):
        return str(error), USAGE
    settings = _settings(args)
    if (refused := refusal(error, settings)) is not None:
        return refused, ENVIRONMENT
    if isinstance(error, KafkaConnectionError):
        return unreachable(settings.bootstrap, secure=settings.security.protocol != "PLAINTEXT"), ENVIRONMENT
    if isinstance(error, TopicMissing):
        missing = topic_missing(error.topic, settings.bootstrap)
        return str(missing), missing.code
    if isinstance(error, KafkaError):
        return f"Kafka at {settings.bootstrap} refused: {error}", ENVIRONMENT
    return (
        f"unexpected {type(error).__name__}: {error}. This is a bug in evalstream: rerun with --debug for the "
        "traceback and report it.",
        ENVIRONMENT,
    )


if __name__ == "__main__":
    sys.exit(main())
