"""The fault scenarios, sized by their arguments: small in `tests/faults`, long in
`bench/chaos.py`. Each returns its `Result` (mismatches 0 is the pass)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from events.codec import encode
from tests import builders
from tests.faults.chaos import (
    Group,
    Message,
    ProgressWatch,
    Publisher,
    Result,
    chaos_log,
    mismatches,
    replayed,
)
from tests.faults.poison import NOT_A_MESSAGE, STATEFUL, poisons
from worker.local import broker
from worker.local.clusters import local_broker
from worker.local.processes import isolated_settings
from worker.local.records import create_compacting_fast, read_topic
from worker.runtime.topics import ensure_topics
from worker.settings import Settings


def _prepared(bootstrap: str, **overrides: object) -> Settings:
    settings = isolated_settings(bootstrap, **overrides)
    asyncio.run(ensure_topics(settings))
    return settings


def _run_with_faults(
    settings: Settings,
    root: Path,
    log: list[Message],
    *,
    name: str,
    workers: int,
    seconds: float,
    faults: list[Callable[[Group], None]],
    seed: int,
    env: dict[str, str] | None = None,
) -> Result:
    """Publish `log` over `seconds` while applying `faults` at random moments, each timed
    from the moment it hits until every open run's progress resumes (`env`: more
    environment variables for the workers)."""
    rng = random.Random(seed)
    group = Group(settings, root, env)
    for _ in range(workers):
        group.add()
    watch = ProgressWatch(settings)
    watch.start()
    publisher = Publisher(settings, log, seconds)
    recoveries = []
    try:
        for worker in group.workers:
            worker.wait_ready()
        publisher.start()
        for fault in faults:
            time.sleep(rng.uniform(0.2, 2.0))
            hit = time.monotonic()
            fault(group)
            recoveries.append(watch.recovery(hit, publisher))
        runs, found = mismatches(settings, publisher)
    finally:
        watch.stopping.set()
        group.stop_all()
    return Result(name, len(faults), len(log), runs, len(found), recoveries, found)


def _kill_one(group: Group, rng: random.Random, *, replace: bool) -> None:
    """kill -9 of a worker; `replace`: restarted at once, in place (on its data dir) or as
    a new worker, at random."""
    victim = rng.choice(group.workers)
    group.kill(victim)
    if replace:
        group.add(in_place_of=victim if rng.random() < 0.5 else None)


def worker_crashes(
    bootstrap: str, root: Path, *, kills: int, runs: int, tasks: int, seconds: float, seed: int
) -> Result:
    """kill -9 of the only worker at random moments, restarted at once (on its data dir,
    or as a new worker on an empty one)."""
    settings = _prepared(bootstrap)
    rng = random.Random(seed)
    log = chaos_log("crash", runs=runs, tasks=tasks, attempts=5, seed=seed)
    faults = [lambda group: _kill_one(group, rng, replace=True) for _ in range(kills)]
    return _run_with_faults(
        settings, root, log, name="worker kill -9", workers=1, seconds=seconds, faults=faults, seed=seed
    )


def broker_crashes(root: Path, *, restarts: int, runs: int, tasks: int, seconds: float, seed: int) -> Result:
    """The broker stopped and started again mid-run, cleanly and by kill -9 in turn, on a
    broker of its own; the worker must reconnect by itself."""
    with local_broker(root / "broker") as config:
        settings = _prepared(config.bootstrap)
        log = chaos_log("bounce", runs=runs, tasks=tasks, attempts=5, seed=seed)

        def bounce(index: int) -> Callable[[Group], None]:
            def fault(group: Group) -> None:
                if index % 2:
                    pid = broker.status(config).pid
                    assert pid is not None, "the broker is not running"
                    os.kill(pid, signal.SIGKILL)
                    while broker.status(config).pid is not None:
                        time.sleep(0.05)
                else:
                    broker.stop(config)
                broker.start(config, timeout=120)

            return fault

        faults = [bounce(index) for index in range(restarts)]
        return _run_with_faults(
            settings, root, log, name="broker stop / kill -9", workers=1, seconds=seconds, faults=faults, seed=seed
        )


def rebalances(bootstrap: str, root: Path, *, changes: int, runs: int, tasks: int, seconds: float, seed: int) -> Result:
    """Two to three workers over a 3-partition topic: workers added, stopped cleanly and
    killed in turn, so partitions move and their state is restored from the changelog."""
    settings = _prepared(bootstrap, partitions=3)
    rng = random.Random(seed)
    log = chaos_log("moved", runs=runs, tasks=tasks, attempts=5, seed=seed)

    def change(index: int) -> Callable[[Group], None]:
        def fault(group: Group) -> None:
            if len(group.workers) < 3 and index % 3 == 0:
                group.add()
            elif index % 3 == 1:
                group.stop(rng.choice(group.workers))
                group.add()
            else:
                _kill_one(group, rng, replace=len(group.workers) < 3)

        return fault

    faults = [change(index) for index in range(changes)]
    return _run_with_faults(settings, root, log, name="rebalance", workers=2, seconds=seconds, faults=faults, seed=seed)


def bad_input(
    bootstrap: str, root: Path, *, count: int, runs: int, tasks: int, seconds: float, seed: int
) -> tuple[Result, list[str]]:
    """`count` malformed messages interleaved with valid runs. Besides the summaries, every
    dead letter must be the oracle's (reason and source coordinates), every poison sent must
    be dead-lettered with its own reason (never "internal-error"), and the worker must never
    restart nor log a traceback. Returns the result and the problems found."""
    settings = _prepared(bootstrap)
    rng = random.Random(seed)
    log = chaos_log("dirty", runs=runs, tasks=tasks, attempts=5, seed=seed)
    oversized = 0
    reasons: Counter[str] = Counter()
    for index, bad in enumerate(poisons("dirty-0", count, seed)):
        if bad.kind in NOT_A_MESSAGE:
            continue
        if bad.kind == "oversized":
            oversized += 1
            if oversized > 2:  # 8 MiB each: two say as much as two thousand (so ~4% of `count` is dropped)
                continue
        reasons[bad.reason] += 1
        run = f"dirty-{index % runs}".encode()
        # After the run's run.started (the first message of the run), as STATEFUL requires.
        first = next(at for at, (key, _) in enumerate(log) if key == run)
        at = rng.randrange(first + 1, len(log) + 1) if bad.kind in STATEFUL else rng.randrange(len(log) + 1)
        key = run if bad.key == b"dirty-0" else bad.key
        log.insert(at, (key, bad.value.replace(b"dirty-0", run.decode().encode())))
    result = _run_with_faults(settings, root, log, name="bad input", workers=1, seconds=seconds, faults=[], seed=seed)
    problems = []
    want = {(str(offset).encode(), reason.encode()) for _, offset, reason in replayed(settings).rejected}
    dead = read_topic(settings, settings.deadletter_topic, until=len(want), timeout=60)
    got = {(r.headers["evalstream.source.offset"], r.headers["evalstream.reason"]) for r in dead}
    if got != want:
        problems.append(f"dead letters: {len(want - got)} missing, {len(got - want)} unexpected")
    said = Counter(r.headers["evalstream.reason"].decode() for r in dead)
    if said != reasons:
        problems.append(f"dead-letter reasons {dict(said)}, the poisons' own {dict(reasons)}")
    log_text = Group(settings, root).logs()
    if "Traceback" in log_text or "internal error" in log_text:
        problems.append("the worker logged a traceback")
    result.faults = len(want)
    return result, problems


def state_edges(bootstrap: str, root: Path, *, restarts: int, tasks: int, seconds: float, seed: int) -> Result:
    """One run over four partitions, so three changelog partitions stay empty, and a
    changelog compacted as fast as the broker allows: restarts must recover both."""
    settings = _prepared(bootstrap, partitions=4)
    asyncio.run(create_compacting_fast(settings, f"{settings.app_id}-state-changelog"))
    rng = random.Random(seed)
    log = chaos_log("edge", runs=1, tasks=tasks, attempts=5, seed=seed)
    faults = [lambda group: _kill_one(group, rng, replace=True) for _ in range(restarts)]
    return _run_with_faults(
        settings, root, log, name="empty and compacted changelog", workers=1, seconds=seconds, faults=faults, seed=seed
    )


FROZEN_SESSION = 6.0
"""The frozen-owner workers' session timeout: the broker's smallest (group.min.session.timeout.ms)."""


def frozen_owners(
    bootstrap: str, root: Path, *, freezes: int, runs: int, tasks: int, seconds: float, seed: int
) -> Result:
    """Two workers over four partitions, runs published at a steady pace; one worker at a
    time is frozen (SIGSTOP) past its session timeout, the group moves its partitions to the
    other, and it is thawed (SIGCONT) with whatever it had under way. Every summary must end
    exact and none be published twice. Then every worker stops, a new one on an empty data
    dir restores every partition from the changelog alone, and a late attempt on every run
    must give its next revision, byte for byte what replay gives."""
    settings = _prepared(bootstrap, partitions=4)
    rng = random.Random(seed)
    log = chaos_log("frozen", runs=runs, tasks=tasks, attempts=5, seed=seed)
    env = {"EVALSTREAM_SESSION_TIMEOUT": str(FROZEN_SESSION)}

    def freeze(group: Group) -> None:
        victim = rng.choice(group.workers)
        os.kill(victim.process.pid, signal.SIGSTOP)
        try:
            time.sleep(FROZEN_SESSION * rng.uniform(1.3, 2.0))
        finally:
            os.kill(victim.process.pid, signal.SIGCONT)

    faults: list[Callable[[Group], None]] = [freeze] * freezes
    result = _run_with_faults(
        settings, root, log, name="frozen owner", workers=2, seconds=seconds, faults=faults, seed=seed, env=env
    )
    late: list[Message] = [
        (key, encode(builders.trial("task-00001", f"after-restore-{key.decode()}", run_id=key.decode())))
        for key in dict.fromkeys(key for key, _ in log if key is not None)
    ]
    fresh = Group(settings, root / "fresh")
    try:
        fresh.add().wait_ready()
        publisher = Publisher(settings, late, 1.0)
        publisher.start()
        _, found = mismatches(settings, publisher)
    finally:
        fresh.stop_all()
    result.mismatches += len(found)
    result.details += [f"after a restore from the changelog alone: {detail}" for detail in found]
    return result
