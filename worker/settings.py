"""Worker settings: environment variables (EVALSTREAM_*), overridable by CLI flags.

Secrets (the SASL password, the SSL key's password) are left out of `repr`, so that a
setting logged or shown in an error never carries them."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from events.clients.security import Security
from events.outputs import SUMMARY_MAX_BYTES
from worker.failure import CommandError

N = TypeVar("N", int, float)

PROGRESS_INTERVAL = 0.15
"""Seconds between two progress windows of a partition, by default. The window is most of the
latency from an event to the progress that shows it: an event handled just after a window
closes waits the whole next one. At 0.2 s the p99 at 1,000 events/s came within a few percent
of 250 ms, and past it on a busier machine."""

__all__ = ["SUMMARY_MAX_BYTES", "Settings"]  # the summaries limit is the contract's (events.outputs)


def _env(name: str, default: str) -> str:
    return os.environ.get(f"EVALSTREAM_{name}", default)


def _int(name: str, default: str) -> int:
    return _number(name, default, int, "a whole number")


def _float(name: str, default: str) -> float:
    return _number(name, default, float, "a number")


def _number(name: str, default: str, kind: Callable[[str], N], wanted: str) -> N:
    """EVALSTREAM_<name> read as a number: a value that is not one is the user's to fix, said
    as such (a command prints it, instead of a traceback)."""
    value = _env(name, default)
    try:
        return kind(value)
    except ValueError:
        raise CommandError(
            f"EVALSTREAM_{name} is {value!r}, which is not {wanted}: set it to one (the default is {default}), "
            "or unset it"
        ) from None


def _fold(name: str) -> bool:
    """Whether EVALSTREAM_FOLD (`name`) asks for the native fold: "native", "python", or unset
    (native where it is built)."""
    # Imported here, not with this module: importing the fold picks its build (compiled or
    # source, `projections/__init__.py`), which the test process chooses after importing this.
    from projections.kernels import native_fold

    built = native_fold() is not None
    if name == "native" and not built:
        raise CommandError(
            "EVALSTREAM_FOLD is 'native', but the native fold is not built (it needs cargo when installing: "
            "see the build page of the docs); unset it to use the Python fold"
        )
    if name not in ("", "native", "python"):
        raise CommandError(f"EVALSTREAM_FOLD is {name!r}: set it to 'native' or 'python', or unset it")
    return built and name != "python"


@dataclass(frozen=True)
class Settings:
    bootstrap: str = field(default_factory=lambda: _env("BOOTSTRAP", "127.0.0.1:9092"))
    app_id: str = field(default_factory=lambda: _env("APP_ID", "evalstream"))
    events_topic: str = field(default_factory=lambda: _env("EVENTS_TOPIC", "evalstream.events"))
    progress_topic: str = field(default_factory=lambda: _env("PROGRESS_TOPIC", "evalstream.progress"))
    summaries_topic: str = field(default_factory=lambda: _env("SUMMARIES_TOPIC", "evalstream.summaries"))
    deadletter_topic: str = field(default_factory=lambda: _env("DEADLETTER_TOPIC", "evalstream.deadletter"))
    partitions: int = field(default_factory=lambda: _int("PARTITIONS", "1"))
    replication_factor: int = field(default_factory=lambda: _int("REPLICATION_FACTOR", "0"))
    """Replicas of each topic the worker creates (0: the cluster's `default.replication.factor`)."""
    data_dir: Path = field(default_factory=lambda: Path(_env("DATA_DIR", "~/.cache/evalstream/worker")).expanduser())
    web_host: str = field(default_factory=lambda: _env("WEB_HOST", "127.0.0.1"))
    """Where the worker's web server (/ready, /live, /metrics) listens: 0.0.0.0 in a container."""
    web_port: int = field(default_factory=lambda: _int("WEB_PORT", "6066"))
    dashboard_host: str = field(default_factory=lambda: _env("DASHBOARD_HOST", "127.0.0.1"))
    dashboard_port: int = field(default_factory=lambda: _int("DASHBOARD_PORT", "6067"))
    dashboard_recent: int = field(default_factory=lambda: _int("DASHBOARD_RECENT_RUNS", "200"))
    """Closed runs the dashboard keeps in memory (the last to move); older ones it reads back."""
    progress_interval: float = field(default_factory=lambda: _float("PROGRESS_INTERVAL", str(PROGRESS_INTERVAL)))
    """Seconds between two progress windows of an events partition (longer while many tasks'
    progress waits: `worker.runtime.progress`)."""
    flush_interval: float = field(default_factory=lambda: _float("FLUSH_INTERVAL", "0.1"))
    """Seconds between two checkpoints (transactions) of a partition with something to write: a
    summary or a dead letter is readable once its checkpoint commits. One holding progress is
    sealed at once."""
    session_timeout: float = field(default_factory=lambda: _float("SESSION_TIMEOUT", "10"))
    """Seconds before the group gives a silent worker's partitions to others (faust: 60)."""
    transaction_timeout: float = field(default_factory=lambda: _float("TRANSACTION_TIMEOUT", "10"))
    """Seconds the broker lets a checkpoint's transaction stay open before it aborts it (Kafka
    Streams: 10). A worker killed with a transaction open holds back every reader of
    committed records until then (plus up to the brokers'
    `transaction.abort.timed.out.transaction.cleanup.interval.ms`, 10 s by default), when no
    other worker claims its partitions first; and it is the longest a checkpoint's write
    waits for the broker before the partition's producer is renewed. At most the brokers'
    `transaction.max.timeout.ms` (15 minutes by default)."""
    fetch_max_wait_ms: int = field(default_factory=lambda: _int("FETCH_MAX_WAIT_MS", "20"))
    """How long the broker may hold an empty fetch (faust's own: 1500; see worker.runtime.consumer)."""
    flush_every: int = field(default_factory=lambda: _int("FLUSH_EVERY", "1000"))
    cache_runs: int = field(default_factory=lambda: _int("CACHE_RUNS", "10000"))
    """Most runs a worker holds in memory once their changes are stored (worker.runtime.cache)."""
    cache_mb: int = field(default_factory=lambda: _int("CACHE_MB", "64"))
    """Most memory, in MiB by the cache's estimate, of the runs a worker holds once their
    changes are stored."""
    retire_closed: bool = field(default_factory=lambda: _env("RETIRE_CLOSED", "1") not in ("0", "false", "no"))
    """Retire closed runs out of the changelog into the archive topic once durable, so that a
    partition's restore reads only open runs (retired ones are restored on a late event
    either way)."""
    native_fold: bool = field(default_factory=lambda: _fold(_env("FOLD", "")))
    """Hold runs in the native fold (the default where it is built), or in the Python fold
    (EVALSTREAM_FOLD=python); both store the same records, so a worker may switch between them."""
    instance_id: str | None = field(default_factory=lambda: _env("INSTANCE_ID", "") or None)
    """The worker's stable name in its group (KIP-345 static membership): a worker restarted
    under the same name takes its partitions back at once; unset, every start is a new member."""
    security: Security = field(default_factory=Security.from_env)
    """TLS and SASL (EVALSTREAM_SECURITY_PROTOCOL, _SASL_*, _SSL_*: `events.clients.security`)."""

    @property
    def changelog_topic(self) -> str:
        """The worker's state (`worker.runtime.store`), under faust's name for a table's changelog."""
        return f"{self.app_id}-state-changelog"

    @property
    def archive_topic(self) -> str:
        """Where retired runs are (`worker.runtime.archive`), named like faust's own topics."""
        return f"{self.app_id}-archive"

    def with_overrides(self, **values: Any) -> Settings:
        """These settings with every non-None value of `values` (CLI flags) applied."""
        known = {f.name for f in fields(self)}
        return replace(self, **{k: v for k, v in values.items() if k in known and v is not None})

    def secrets(self) -> tuple[str, ...]:
        """The values that must never be shown (logs mask them: `worker.commands.redact`)."""
        return (self.security.sasl_password,) if self.security.sasl_password else ()

    def client_options(self) -> dict[str, Any]:
        """aiokafka keyword arguments for the connection and its security."""
        return {"bootstrap_servers": self.bootstrap, **self.security.options()}
