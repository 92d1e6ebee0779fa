"""Changelog bytes the worker writes per event, as a run grows.

Run: `python -m bench.changelog`. Feeds synthetic runs of growing size (same trials per
task, more tasks) through the worker's processor, counting what its checkpoints write,
i.e. what the changelog topic receives: the state is keyed per task, so the bytes per
event follow the size of a task, not of the run. Two policies: a checkpoint after every
event (a worker that is never behind: the worst case) and every 1,000 events (the
default under load, where a task changed by several events is written once).
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from events.synthetic import synthetic_run
from worker.runtime.processor import Processor, Record


def main() -> None:
    for flush_every in (1, 1000):
        print(f"checkpoint every {flush_every:,} events:")
        for tasks in (20, 200, 2_000, 20_000):
            processor = Processor(Store(), flush_every=flush_every)
            processor.assign([0])
            snapshots = []
            events = 0
            for offset, event in enumerate(synthetic_run("grow", tasks=tasks, attempts=5, seed=1)):
                processor.handle(0, [Record(offset, b"grow", orjson.dumps(event))], 0.0)
                events += 1
                if processor.checkpoint_due(0) and (snapshot := processor.snapshot(0)) is not None:
                    snapshots.append(snapshot)
                    processor.written(snapshot, {})
            if (snapshot := processor.snapshot(0)) is not None:  # what the timer checkpoints at the end
                snapshots.append(snapshot)
            writes = [(key, value) for taken in snapshots for key, value in (*taken.records, taken.checkpoint)]
            written = sum(len(key) + len(value) for key, value in writes)
            print(
                f"  run of {events:>9,} events: {written / events:8.0f} changelog bytes per event, "
                f"{len(writes) / events:.2f} writes"
            )


class Store:
    """Nothing stored: every run stays in the cache (the bytes are what is measured)."""

    def get(self, partition: int, key: bytes) -> bytes | None:
        return None

    def scan(self, partition: int, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter(())


if __name__ == "__main__":
    main()
