"""Changelog bytes the worker writes per event, as a run grows.

Run: `python -m bench.changelog`. Feeds synthetic runs of growing size (same trials per
task, more tasks) through the worker's processor with an in-memory store that counts what
is written, i.e. what the changelog topic receives: the state is keyed per task, so the
bytes per event follow the size of a task, not of the run. Two flush policies: after every
event (a worker that is never behind: the worst case) and every 1,000 events (the
default under load, where a task changed by several events is written once).
"""

from __future__ import annotations

import orjson

from events.synthetic import synthetic_run
from worker.processor import Processor, Source


class CountingStore(dict[bytes, bytes]):
    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self.writes = 0

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.written += len(key) + len(value)
        self.writes += 1
        super().__setitem__(key, value)


def main() -> None:
    for flush_every in (1, 1000):
        print(f"flush every {flush_every:,} events:")
        for tasks in (20, 200, 2_000, 20_000):
            store = CountingStore()
            processor = Processor(store=store, flush_every=flush_every)
            events = 0
            for offset, event in enumerate(synthetic_run("grow", tasks=tasks, attempts=5, seed=1)):
                processor.handle(b"grow", orjson.dumps(event), Source("events", 0, offset))
                if processor.flush_due(0):
                    processor.flush(0)
                events += 1
            processor.flush(0)
            per_event, writes = store.written / events, store.writes / events
            print(f"  run of {events:>9,} events: {per_event:8.0f} changelog bytes per event, {writes:.2f} writes")


if __name__ == "__main__":
    main()
