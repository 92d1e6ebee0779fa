"""Fault injection over a real broker, shared by `tests/faults` (reduced) and `bench/chaos.py`
(the long version).

A scenario publishes a multi-run log at a steady pace while faults happen, then checks the
summaries topic against an oracle that shares no code path with the worker's runtime: the
`evalstream replay --from-topic` command, run in a process of its own over the events topic
as it ended up (`replayed`), so that a publisher retry that duplicated or reordered
messages is judged by what the topic holds. Each run's latest summary on the topic must be
the replay's last, byte for byte, and every revision the replay prints must be on the
topic; the records replay reports as rejected are the dead letters the worker must write,
and it may write no other (an output dead-lettered as refused is a run gone wrong).

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
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiokafka import AIOKafkaProducer

from events.codec import MAX_EVENT_BYTES, encode
from events.synthetic import interleave, synthetic_run
from tests import builders
from worker.local.processes import WorkerProcess, free_port, topic_flags
from worker.local.records import read_whole
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
    stall: float | None = None
    """The longest a progress record or summary took from its production (its Kafka
    timestamp) until a read_committed reader saw it, in seconds (None: none was read)."""
    traces: dict[str, float] = field(default_factory=dict)
    """What shows that the faults happened (counters summed over the workers, times)."""

    def row(self) -> str:
        most = f"{max(self.recoveries):.1f}" if self.recoveries else "-"
        median = f"{statistics.median(self.recoveries):.1f}" if self.recoveries else "-"
        stall = f"{self.stall:.1f}" if self.stall is not None else "-"
        cells = [self.scenario, self.faults, f"{self.events:,}", self.runs, self.mismatches, most, median, stall]
        return "| " + " | ".join(str(cell) for cell in cells) + " |"


TABLE_HEAD = (
    "| scenario | faults | events | runs | mismatches | max recovery (s) | median recovery (s) "
    "| max committed-read stall (s) |\n"
    "|---|---|---|---|---|---|---|---|"
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
    (aiokafka retries; a send that still fails is sent again at the end); `pauses`: message
    index -> seconds of silence before it (bursts)."""

    def __init__(
        self, settings: Settings, messages: list[Message], seconds: float, pauses: dict[int, float] | None = None
    ) -> None:
        super().__init__(daemon=True)
        self.settings, self.messages, self.seconds = settings, messages, seconds
        self.pauses = pauses or {}
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
                start += self.pauses.get(index, 0.0)
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
    """Records when each run's progress events arrive (`topic`: another output topic's
    records), to time recoveries, and the longest a record waited between its production and
    its reading (`stall`: a committed reader sees nothing past an open transaction, a dead
    owner's included)."""

    def __init__(self, settings: Settings, topic: str | None = None) -> None:
        super().__init__(daemon=True)
        self.settings = settings
        self.topic = topic or settings.progress_topic
        self.seen: list[tuple[float, bytes]] = []
        self.stall: float | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        asyncio.run(self._watch())

    async def _watch(self) -> None:
        consumer = await topic_reader(self.settings, self.topic, at_end=True, wait=float("inf"))
        assert consumer is not None, "waits for the topic"
        try:
            while not self.stopping.is_set():
                try:
                    batches = await consumer.getmany(timeout_ms=100)
                except Exception:  # the broker is down: keep trying
                    await asyncio.sleep(0.2)
                    continue
                now, wall = time.monotonic(), time.time()
                records = [record for batch in batches.values() for record in batch if record.key]
                self.seen.extend((now, record.key) for record in records)
                waits = [wall - record.timestamp / 1000 for record in records]
                self.stall = max([*waits, *([] if self.stall is None else [self.stall])], default=None)
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


COUNTERS = (
    "evalstream_partitions_fenced_total",
    "evalstream_partitions_redone_total",
    "evalstream_checkpoints_abandoned_total",
    "evalstream_partition_failures_total",
)
"""The engine's counters a group sums over its workers (`Group.counted`): the traces of faults."""


class Group:
    """Worker processes in one consumer group, each with its own data dir and web port
    (`env`: more environment variables for each; `bootstraps`: each new worker's bootstrap
    servers in turn, a proxy of its own, else the settings')."""

    def __init__(
        self, settings: Settings, root: Path, env: dict[str, str] | None = None, bootstraps: list[str] | None = None
    ) -> None:
        self.settings, self.root, self.env = settings, root, env
        self.bootstraps = bootstraps or [settings.bootstrap]
        self.workers: list[WorkerProcess] = []
        self.started = 0
        self.counted: Counter[str] = Counter()
        """COUNTERS summed over every worker stopped (a killed one: as last scraped, `scrape_all`)."""
        self.last: dict[WorkerProcess, Counter[str]] = {}
        self.killed = 0

    def add(self, in_place_of: WorkerProcess | None = None, bootstrap: str | None = None) -> WorkerProcess:
        """A new worker; `in_place_of` a stopped one: on its data dir (a container
        restarted), so that it restarts from its local copy, through its proxy."""
        data_dir = self.root / f"worker-{self.started + 1}"
        if in_place_of is not None:
            data_dir = in_place_of.log_path.parent
            in_place_of.log_path.rename(data_dir / f"worker.log.{self.started + 1}")
            bootstrap = bootstrap or in_place_of.settings.bootstrap
        bootstrap = bootstrap or self.bootstraps[self.started % len(self.bootstraps)]
        self.started += 1
        settings = self.settings.with_overrides(web_port=free_port(), bootstrap=bootstrap)
        worker = WorkerProcess(settings, data_dir, env=self.env)
        self.workers.append(worker)
        return worker

    def scrape_all(self) -> None:
        """Read every running worker's COUNTERS (kept until it stops)."""
        for worker in self.workers:
            self._scrape(worker)

    def _scrape(self, worker: WorkerProcess) -> None:
        if worker.process.poll() is not None:
            return
        try:
            samples = worker.scrape()
        except (OSError, RuntimeError):
            return  # not serving yet, or on its way out: its last scrape stands
        self.last[worker] = Counter({name: samples.get(name, 0.0) for name in COUNTERS})

    def _forget(self, worker: WorkerProcess) -> None:
        self.counted.update(self.last.pop(worker, Counter()))
        self.workers.remove(worker)

    def kill(self, worker: WorkerProcess) -> None:
        self._scrape(worker)
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait()
        self.killed += 1
        self._forget(worker)

    def stop(self, worker: WorkerProcess) -> None:
        self._scrape(worker)
        worker.stop()
        self._forget(worker)

    def end(self, workers: list[WorkerProcess], bound: float) -> list[float]:
        """SIGTERM `workers` at once; the seconds each took to exit, inf for one still running
        after `bound` (then killed)."""
        began = time.monotonic()
        for worker in workers:
            self._scrape(worker)
            worker.process.terminate()
        took = []
        for worker in workers:
            try:
                worker.process.wait(timeout=max(0.0, began + bound - time.monotonic()))
                took.append(time.monotonic() - began)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
                took.append(float("inf"))
            self._forget(worker)
        return took

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
    from the topic, or one on the topic twice (outputs are committed exactly once); and a
    line per run with dead letters replay does not give."""
    publisher.join()
    if publisher.error is not None:
        raise publisher.error
    replay = replayed(settings)
    wanted = replay.summaries
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
    return len(wanted), found + _unexpected_letters(settings, replay)


def _unexpected_letters(settings: Settings, replay: Replayed) -> list[str]:
    """The dead letters replay does not give (an output said to be refused, a good record
    taken for bad): one line per run, with their reasons."""
    want = {(str(offset).encode(), reason.encode()) for _, offset, reason in replay.rejected}
    unexpected: dict[bytes, Counter[str]] = {}
    for letter in read_whole(settings, settings.deadletter_topic):
        headers = letter.headers
        if (headers.get("evalstream.source.offset"), headers.get("evalstream.reason")) not in want:
            reason = headers.get("evalstream.reason", b"?").decode()
            unexpected.setdefault(letter.key or b"?", Counter())[reason] += 1
    return [f"{key.decode()}: dead letters replay does not give: {dict(why)}" for key, why in unexpected.items()]
