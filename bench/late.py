"""What a late event on a retired run costs in bytes: changelog, archive and summaries.

Run: `python -m bench.late [--tasks 200] [--attempts 5] [--late 3]`. Folds one synthetic run
of `--tasks` tasks through the worker's processor (no broker: each checkpoint's records are
put in a dict store, the archive is a list), lets it retire, then sends `--late` late
attempts on it, one at a time, each in a checkpoint of its own followed by the checkpoints
that retire the run again if the worker does. Prints, for each late attempt, the bytes that
went to the changelog (keys and values), to the archive and to the summaries topic, and the
run's own size for scale.
"""

from __future__ import annotations

import argparse

import orjson

from bench.processor import DictStore
from events.codec import encode
from events.synthetic import synthetic_run
from tests import builders
from worker.runtime.processor import Processor, Record


class Worker:
    """The processor driven as the engine drives it, counting bytes per destination."""

    def __init__(self) -> None:
        self.store = DictStore()
        self.archive: list[tuple[bytes, bytes]] = []
        self.processor = Processor(self.store, cache_runs=0)
        self.processor.assign([0])
        self.offset = 0
        self.written = {"changelog": 0, "archive": 0, "summary": 0}

    def send(self, line: bytes) -> None:
        record = Record(self.offset, orjson.loads(line)["run_id"].encode(), line)
        self.offset += 1
        fetched: dict[str, bytes] = {}
        while needed := self.processor.archives_needed(0, [record], fetched):
            for run_id, ref in needed.items():
                fetched[run_id] = self.archive[ref.offset][1]
        for item in self.processor.handle(0, [record], 0.0, fetched):
            if item.stream == "summary":
                self.written["summary"] += len(item.value)

    def checkpoint(self) -> None:
        """A checkpoint, then more while the processor has runs to retire."""
        while (snapshot := self.processor.snapshot(0)) is not None:
            changes: list[tuple[bytes, bytes | None]] = [*snapshot.records]
            retired = {}
            for retirement in snapshot.retirements:
                self.archive.append((retirement.run_id.encode(), retirement.archive))
                self.written["archive"] += len(retirement.run_id) + len(retirement.archive)
                retired[retirement.run_id] = retirement.ref(0, len(self.archive) - 1)
                changes += retirement.records(retired[retirement.run_id])
            changes.append(snapshot.checkpoint)
            for key, value in changes:
                self.written["changelog"] += len(key) + len(value or b"")
                self.store.write(key, value)
            self.processor.written(snapshot, retired)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--late", type=int, default=3)
    args = parser.parse_args()
    worker = Worker()
    for event in synthetic_run("late", tasks=args.tasks, attempts=args.attempts, seed=1):
        worker.send(orjson.dumps(event))
    worker.checkpoint()
    held = sum(len(key) + len(value) for key, value in worker.store.values.items())
    print(
        f"a closed run of {args.tasks} tasks x {args.attempts} attempts, retired: {held:,} bytes left in the "
        f"changelog, {worker.written['archive']:,} in the archive (its stored form {worker.written['changelog']:,})"
    )
    for n in range(args.late):
        before = dict(worker.written)
        late = builders.score(f"task-{n:05d}", f"late-{n}", "reward", {"score": 1.0}, run_id="late")
        worker.send(encode(late))
        worker.checkpoint()
        delta = {name: worker.written[name] - before[name] for name in before}
        print(
            f"late attempt {n + 1}: changelog {delta['changelog']:,} B, archive {delta['archive']:,} B, "
            f"summary {delta['summary']:,} B"
        )


if __name__ == "__main__":
    main()
