"""Fault injection over a real broker, shared by `tests/faults` (reduced) and `bench/chaos.py`
(the long version).

A scenario publishes a multi-run log at a steady pace while faults happen, then checks the
summaries topic against an oracle that shares no code path with the worker's runtime: the
`evalstream replay --from-topic` command, run in a process of its own over the events topic
as it ended up (`replayed`), so that a publisher retry that duplicated or reordered
messages is judged by what the topic holds. Each run's latest summary on the topic must be
the replay's last, byte for byte, and every revision the replay prints must be on the
topic; the records replay reports as rejected are the dead letters the worker must write.

The log (`chaos_log`) carries the input faults of every scenario: events published twice (a
producer retry), an event after each run's close (a new revision) and a second `run.closed`
(no new revision).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiokafka import AIOKafkaProducer

from events.codec import MAX_EVENT_BYTES, encode
from events.synthetic import interleave, synthetic_run
from tests import builders
from worker.local.processes import WorkerProcess, free_port, topic_flags
from worker.settings import Settings
from worker.topic_reader import topic_reader

Message = tuple[bytes | None, bytes]


@dataclass
class Result:
    """One scenario's line in the chaos table."""

    scenario: str
    faults: int
    events: int
    runs: int
    mismatches: int
    recoveries: list[float] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    def row(self) -> str:
        most = f"{max(self.recoveries):.1f}" if self.recoveries else "-"
        median = f"{statistics.median(self.recoveries):.1f}" if self.recoveries else "-"
        cells = [self.scenario, self.faults, f"{self.events:,}", self.runs, self.mismatches, most, median]
        return "| " + " | ".join(str(cell) for cell in cells) + " |"


TABLE_HEAD = (
    "| scenario | faults | events | runs | mismatches | max recovery (s) | median recovery (s) |\n"
    "|---|---|---|---|---|---|---|"
)


def _run_events(run_id: str, tasks: int, attempts: int, seed: int) -> Iterator[dict[str, object]]:
    """A synthetic run, then a late trial (a new revision) and a second close (none)."""
    yield from synthetic_run(run_id, tasks=tasks, attempts=attempts, seed=seed)
    late = builders.trial("task-00000", f"late-{run_id}", run_id=run_id, event_id=f"late:{run_id}")
    yield orjson.loads(encode(late))
    yield orjson.loads(encode(builders.closed(run_id, event_id=f"reclose:{run_id}")))


def chaos_log(
    prefix: str, *, runs: int, tasks: int, attempts: int, seed: int, duplicates: float = 0.03
) -> list[Message]:
    """Interleaved runs keyed by run_id; a `duplicates` share of events is sent twice."""
    rng = random.Random(seed)
    sources = [_run_events(f"{prefix}-{i}", tasks, attempts, seed + i) for i in range(runs)]
    messages: list[Message] = []
    for event in interleave(sources, seed=seed):
        message = (str(event["run_id"]).encode(), orjson.dumps(event))
        messages.append(message)
        if rng.random() < duplicates:
            messages.append(message)
    return messages


REJECTED = re.compile(r"^(?P<topic>.+)\[(?P<partition>\d+)\]@(?P<offset>\d+): (?P<reason>[a-z0-9-]+): ")
"""How `replay --from-topic` reports a record it rejects, on stderr."""


@dataclass
class Replayed:
    """What `evalstream replay --from-topic` printed for the events topic."""

    summaries: dict[bytes, list[bytes]]
    """Run id -> every summary revision, in order."""
    rejected: set[tuple[int, int, str]]
    """(partition, offset, reason code) of each record it rejected."""


def replayed(settings: Settings, timeout: float = 600.0) -> Replayed:
    """Run `evalstream replay --from-topic` over the events topic (once every publish is
    acknowledged: it folds the topic as it stands when it begins)."""
    command = [sys.executable, "-m", "worker.commands.cli", "replay", "--from-topic", *topic_flags(settings)]
    env = {**os.environ, **settings.security.env()}
    done = subprocess.run(command, capture_output=True, env=env, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"replay --from-topic exited with {done.returncode}: {done.stderr.decode()[-2000:]}")
    summaries: dict[bytes, list[bytes]] = {}
    for line in done.stdout.splitlines():
        summaries.setdefault(str(orjson.loads(line)["run_id"]).encode(), []).append(line)
    rejected = set()
    for reported in done.stderr.decode().splitlines():
        if found := REJECTED.match(reported):
            rejected.add((int(found["partition"]), int(found["offset"]), found["reason"]))
    return Replayed(summaries, rejected)


class Publisher(threading.Thread):
    """Publishes `messages` at a steady pace over `seconds`, riding out broker restarts
    (aiokafka retries; a send that still fails is sent again at the end)."""

    def __init__(self, settings: Settings, messages: list[Message], seconds: float) -> None:
        super().__init__(daemon=True)
        self.settings, self.messages, self.seconds = settings, messages, seconds
        self.sent = 0
        self.closed_at: dict[bytes, float] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._publish())
        except BaseException as error:  # reported by the scenario, not lost in a thread
            self.error = error

    async def _publish(self) -> None:
        producer = AIOKafkaProducer(
            **self.settings.client_options(),
            linger_ms=5,
            max_request_size=MAX_EVENT_BYTES * 2,
            request_timeout_ms=60_000,
        )
        await producer.start()
        try:
            pending: list[tuple[Message, asyncio.Future[object]]] = []
            start = time.monotonic()
            for index, (key, value) in enumerate(self.messages):
                await asyncio.sleep(max(0.0, start + index * self.seconds / len(self.messages) - time.monotonic()))
                pending.append(((key, value), await producer.send(self.settings.events_topic, value=value, key=key)))
                if key is not None and b'"type":"run.closed"' in value:
                    self.closed_at.setdefault(key, time.monotonic())
            for message, future in pending:
                try:
                    await future
                except Exception:
                    await producer.send_and_wait(self.settings.events_topic, value=message[1], key=message[0])
                self.sent += 1
        finally:
            await producer.stop()


class ProgressWatch(threading.Thread):
    """Records when each run's progress events arrive, to time recoveries."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(daemon=True)
        self.settings = settings
        self.seen: list[tuple[float, bytes]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        asyncio.run(self._watch())

    async def _watch(self) -> None:
        consumer = await topic_reader(self.settings, self.settings.progress_topic, at_end=True, wait=float("inf"))
        assert consumer is not None, "waits for the topic"
        try:
            while not self.stopping.is_set():
                try:
                    batches = await consumer.getmany(timeout_ms=100)
                except Exception:  # the broker is down: keep trying
                    await asyncio.sleep(0.2)
                    continue
                now = time.monotonic()
                self.seen.extend((now, record.key) for batch in batches.values() for record in batch if record.key)
        finally:
            await consumer.stop()

    def recovery(self, since: float, publisher: Publisher, timeout: float = 120.0) -> float:
        """Seconds from `since` until every run still open then has had a progress event."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            open_runs = {key for key, _ in publisher.messages if key} - {
                key for key, at in publisher.closed_at.items() if at < since
            }
            first = {key: at for at, key in reversed(self.seen) if at > since}
            if open_runs <= first.keys():
                return max((first[key] for key in open_runs), default=since) - since
            time.sleep(0.1)
        return float("inf")


class Group:
    """Worker processes in one consumer group, each with its own data dir and web port
    (`env`: more environment variables for each)."""

    def __init__(self, settings: Settings, root: Path, env: dict[str, str] | None = None) -> None:
        self.settings, self.root, self.env = settings, root, env
        self.workers: list[WorkerProcess] = []
        self.started = 0

    def add(self, in_place_of: WorkerProcess | None = None) -> WorkerProcess:
        """A new worker; `in_place_of` a stopped one: on its data dir (a container
        restarted), so that it restarts from its local copy."""
        self.started += 1
        data_dir = self.root / f"worker-{self.started}"
        if in_place_of is not None:
            data_dir = in_place_of.log_path.parent
            in_place_of.log_path.rename(data_dir / f"worker.log.{self.started}")
        worker = WorkerProcess(self.settings.with_overrides(web_port=free_port()), data_dir, env=self.env)
        self.workers.append(worker)
        return worker

    def kill(self, worker: WorkerProcess) -> None:
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait()
        self.workers.remove(worker)

    def stop(self, worker: WorkerProcess) -> None:
        worker.stop()
        self.workers.remove(worker)

    def stop_all(self) -> None:
        for worker in list(self.workers):
            self.stop(worker)

    def logs(self) -> str:
        return "\n".join(path.read_text(errors="replace") for path in sorted(self.root.glob("worker-*/worker.log*")))


async def _summaries(settings: Settings, want: dict[bytes, bytes], timeout: float) -> dict[bytes, list[bytes]]:
    """Run id -> its records on the summaries topic, in order, read until each run's latest
    is `want`'s (or `timeout`)."""
    consumer = await topic_reader(settings, settings.summaries_topic, wait=float("inf"))
    assert consumer is not None, "waits for the topic"
    seen: dict[bytes, list[bytes]] = {}
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(seen.get(key, [b""])[-1] != value for key, value in want.items()):
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                for record in batch:
                    if record.key is not None:
                        seen.setdefault(record.key, []).append(record.value)
        return seen
    finally:
        await consumer.stop()


def mismatches(settings: Settings, publisher: Publisher, timeout: float = 120.0) -> tuple[int, list[str]]:
    """How many runs have a summary, and those whose summaries differ from the replay's
    once the worker caught up: the latest not the replay's last, byte for byte (with the
    event counts and revisions, got against wanted), a revision the replay prints missing
    from the topic, or one on the topic twice (outputs are committed exactly once)."""
    publisher.join()
    if publisher.error is not None:
        raise publisher.error
    wanted = replayed(settings).summaries
    if not wanted:
        return 0, ["no run has a summary: the scenario checked nothing"]
    got = asyncio.run(_summaries(settings, {key: values[-1] for key, values in wanted.items()}, timeout))
    found = []
    for key, values in wanted.items():
        records = got.get(key, [])
        if records[-1:] != values[-1:]:
            expected = orjson.loads(values[-1])
            actual = orjson.loads(records[-1]) if records else {}
            found.append(
                f"{key.decode()}: event_count {actual.get('event_count')} (want {expected['event_count']}), "
                f"revision {actual.get('revision')} (want {expected['revision']})"
            )
        elif missing := [orjson.loads(value)["revision"] for value in values if value not in set(records)]:
            found.append(f"{key.decode()}: revisions {missing} are not on the summaries topic")
        elif twice := sorted({value for value in records if records.count(value) > 1}):
            revisions = [orjson.loads(value)["revision"] for value in twice]
            found.append(f"{key.decode()}: revisions {revisions} are on the summaries topic twice")
    return len(wanted), found
