"""`evalstream export mlflow|parquet`: run summaries written to MLflow or Parquet tables."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from worker.commands.cli.arguments import Commands, command, connection_flags, settings_of, summaries_file_flag
from worker.failure import CommandError


def add(commands: Commands) -> None:
    parser = commands.add_parser(
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
    sinks = parser.add_subparsers(dest="sink", required=True, metavar="SINK")
    mlflow = command(
        sinks,
        "mlflow",
        "one MLflow run per run, updated as its revisions land",
        "MLFLOW_TRACKING_URI=http://127.0.0.1:5000 evalstream export mlflow --follow --experiment-label benchmark",
        to_mlflow,
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
    parquet = command(
        sinks,
        "parquet",
        "Parquet tables of attempts and figures, a file per run, partitioned by date or a label",
        "evalstream export parquet --out results/ --partition-by label:benchmark",
        to_parquet,
    )
    parquet.add_argument("--out", required=True, metavar="DIR", help="the directory of the tables")
    parquet.add_argument(
        "--partition-by",
        default="date",
        metavar="date|label:NAME",
        help="directories by the UTC day a run was first published (default), or by a label's value",
    )
    for sink in (mlflow, parquet):
        summaries_file_flag(sink)
        sink.add_argument("--follow", action="store_true", help="keep exporting new revisions as they land")
        sink.add_argument(
            "--group", help="the consumer group that holds its place in the topic (default <app id>-export-<sink>)"
        )
        connection_flags(sink)


def to_mlflow(args: argparse.Namespace) -> int:
    from worker.commands import export

    uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        raise CommandError("name the MLflow tracking server: --tracking-uri URI, or MLFLOW_TRACKING_URI")
    try:
        from worker.export.to_mlflow import MlflowSink
    except ImportError:
        raise CommandError("the MLflow client is not installed: pip install 'evalstream[mlflow]'") from None
    settings = settings_of(args)
    return export.run(
        lambda: MlflowSink(uri, experiment=args.experiment, experiment_label=args.experiment_label),
        settings=settings,
        group=export.group_of(settings, "mlflow", args.group),
        follow=args.follow,
        from_file=args.from_file,
    )


def to_parquet(args: argparse.Namespace) -> int:
    from worker.commands import export

    try:
        from worker.export.to_parquet import ParquetSink, partition_column
    except ImportError:
        raise CommandError("pyarrow is not installed: pip install 'evalstream[parquet]'") from None
    try:
        partition_column(args.partition_by)
    except ValueError as error:
        raise CommandError(str(error)) from None
    settings = settings_of(args)
    return export.run(
        lambda: ParquetSink(Path(args.out), args.partition_by),
        settings=settings,
        group=export.group_of(settings, "parquet", args.group),
        follow=args.follow,
        from_file=args.from_file,
    )
