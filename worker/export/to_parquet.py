"""`evalstream export parquet`: two tables of Parquet files, one file per run in each.

Layout (Hive-style, which DuckDB, pandas/pyarrow and Spark read as partitioned tables):

    OUT/attempts/<partition>=<value>/<run>.parquet
    OUT/figures/<partition>=<value>/<run>.parquet

`<run>` is 32 hex digits of the run id's SHA-256 (`flat.run_key`: run ids may hold any
character). The partition is `date` (the UTC day a run's first exported revision was
published: a later revision stays in its run's directory) or a label (`label:NAME`: the run's
value of NAME, percent-encoded; `__HIVE_DEFAULT_PARTITION__`, read as null, for a run
without it). Columns (`flat` says what each row is):

- attempts: run_id, revision, task_id, key, attempt (0 first), trial_id, value (null: a dead
  trial), passed, labels (a map);
- figures: run_id, revision, key, figure, k (null for figures without one), value, stderr,
  ci95_low, ci95_high, count, nan_count, labels.

Idempotent by (run, revision): each figures file holds its revision in its key-value metadata
(`evalstream.revision`); a summary whose revision is not above it writes nothing. A later
revision replaces its run's files, each atomically: written beside the tables (in
OUT/.evalstream-tmp) and renamed over the old one, attempts first, so a reader that sees a
figures file of revision N sees attempts of revision N or later. A run whose label partition
changed (a late run.started) is written in its new directory, then removed from the old.
"""

from __future__ import annotations

import datetime
import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from events.outputs import RunSummary
from worker.export.flat import attempt_rows, figures, run_key
from worker.export.sink import UNCHANGED, WRITTEN, Exported, Result, SinkUnavailable

TABLES = ("attempts", "figures")
DATE = "date"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
REVISION = b"evalstream.revision"
TMP = ".evalstream-tmp"

LABELS = pa.map_(pa.string(), pa.string())
ATTEMPTS = pa.schema(
    [
        ("run_id", pa.string()),
        ("revision", pa.int64()),
        ("task_id", pa.string()),
        ("key", pa.string()),
        ("attempt", pa.int32()),
        ("trial_id", pa.string()),
        ("value", pa.float64()),
        ("passed", pa.bool_()),
        ("labels", LABELS),
    ]
)
FIGURES = pa.schema(
    [
        ("run_id", pa.string()),
        ("revision", pa.int64()),
        ("key", pa.string()),
        ("figure", pa.string()),
        ("k", pa.int32()),
        ("value", pa.float64()),
        ("stderr", pa.float64()),
        ("ci95_low", pa.float64()),
        ("ci95_high", pa.float64()),
        ("count", pa.int64()),
        ("nan_count", pa.int64()),
        ("labels", LABELS),
    ]
)


def partition_column(partition_by: str) -> str:
    """The directory name's column: `date`, or NAME of `label:NAME`; raises ValueError else."""
    if partition_by == DATE:
        return DATE
    kind, _, name = partition_by.partition(":")
    if kind != "label" or not name or "/" in name or "=" in name:
        raise ValueError(
            f"--partition-by is `date` or `label:NAME` (a label name without / or =), not {partition_by!r}"
        )
    return name


class ParquetSink:
    def __init__(self, out: Path, partition_by: str) -> None:
        self.name = f"Parquet in {out}"
        self._out = out
        self._column = partition_column(partition_by)
        self._by_date = partition_by == DATE
        self._tmp = out / TMP
        try:
            for table in TABLES:
                (out / table).mkdir(parents=True, exist_ok=True)
            self._tmp.mkdir(exist_ok=True)
            for left in self._tmp.iterdir():  # what a crash left half-written
                left.unlink()
            self._where = self._index()
        except OSError as error:
            raise SinkUnavailable(f"cannot write into {out}: {error.strerror or error}") from None

    def _index(self) -> dict[str, str]:
        """Run file name -> its partition directory, from the figures table as it is."""
        where: dict[str, str] = {}
        for directory in (self._out / "figures").iterdir():
            column = directory.name.partition("=")[0]
            if column != self._column:
                raise SinkUnavailable(
                    f"{self._out} is partitioned by {column!r}, not {self._column!r}: pass the --partition-by it "
                    "was written with, or another directory"
                )
            for file in directory.iterdir():
                where[file.name] = directory.name
        return where

    def write(self, batch: Sequence[Exported]) -> list[Result]:
        try:
            return [self._write(each) for each in batch]
        except OSError as error:
            raise SinkUnavailable(f"cannot write into {self._out}: {error.strerror or error}") from None

    def _write(self, exported: Exported) -> Result:
        summary = exported.summary
        file = run_key(summary.run_id) + ".parquet"
        held = self._where.get(file)
        if held is not None and _revision(self._out / "figures" / held / file) >= summary.revision:
            return Result(summary.run_id, summary.revision, UNCHANGED)
        partition = held if held is not None and self._by_date else self._partition(exported)
        metadata = {REVISION: str(summary.revision).encode()}
        for table, rows in (("attempts", _attempts(summary)), ("figures", _figures(summary))):
            staged = self._tmp / f"{table}-{file}"
            pq.write_table(rows.replace_schema_metadata(metadata), staged, compression="zstd")
            (self._out / table / partition).mkdir(exist_ok=True)
            os.replace(staged, self._out / table / partition / file)
        if held is not None and held != partition:
            for table in TABLES:
                (self._out / table / held / file).unlink(missing_ok=True)
        self._where[file] = partition
        return Result(summary.run_id, summary.revision, WRITTEN)

    def _partition(self, exported: Exported) -> str:
        if self._by_date:
            day = datetime.datetime.fromtimestamp(exported.published, datetime.UTC).date()
            return f"{DATE}={day.isoformat()}"
        value = exported.summary.labels.get(self._column)
        return f"{self._column}={NULL_PARTITION if value is None else urllib.parse.quote(value, safe='')}"


def _revision(path: Path) -> int:
    """The revision a run's figures file holds (0 if it holds none: written again)."""
    try:
        metadata = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowInvalid):
        return 0
    return int(metadata.get(REVISION, b"0"))


def _attempts(summary: RunSummary) -> pa.Table:
    rows = list(attempt_rows(summary))
    fields = ("task_id", "key", "attempt", "trial_id", "value", "passed")
    return _table(ATTEMPTS, summary, len(rows), [[getattr(row, name) for row in rows] for name in fields])


def _figures(summary: RunSummary) -> pa.Table:
    rows = figures(summary)
    fields = ("key", "figure", "k", "value", "stderr", "ci95_low", "ci95_high", "count", "nan_count")
    return _table(FIGURES, summary, len(rows), [[getattr(row, name) for row in rows] for name in fields])


def _table(schema: pa.Schema, summary: RunSummary, count: int, columns: list[list[object]]) -> pa.Table:
    """`columns` between the run's id and revision and its labels, each as `schema` types it."""
    labels = list(summary.labels.items())
    values = [[summary.run_id] * count, [summary.revision] * count, *columns, [labels] * count]
    return pa.table([pa.array(each, field.type) for each, field in zip(values, schema, strict=True)], schema=schema)
