"""faust's own ceiling: the rate at which a faust agent that does nothing consumes a topic.

Run by `bench.e2e` as a subprocess (`python -m bench.faust_ceiling BOOTSTRAP TOPIC DATA_DIR`);
prints `events/s <rate> <count>` once events stop arriving for two seconds (the caller then
stops it): the rate from the first to the last event seen. (Counting to the topic's size
would hang: faust drops messages fetched during its start-up rebalances.) It separates
what faust costs per message from what the worker adds.
"""

from __future__ import annotations

import sys
import time
import uuid

import faust

from worker.runtime import consumer
from worker.settings import Settings


def main() -> None:
    bootstrap, topic, data_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    app = faust.App(
        f"faust-ceiling-{uuid.uuid4().hex[:8]}",
        broker=f"kafka://{bootstrap}",
        store="memory://",
        datadir=data_dir,
        key_serializer="raw",
        value_serializer="raw",
        web_enabled=False,
        consumer_auto_offset_reset="earliest",
    )
    consumer.install(app, Settings().fetch_max_wait_ms)  # the worker's fetch wait, for a fair ratio
    source = app.topic(topic, key_type=bytes, value_type=bytes)
    seen = 0
    first = last = 0.0

    @app.agent(source)
    async def count_events(stream: faust.StreamT[bytes]) -> None:
        nonlocal seen, first, last
        async for _ in stream.events():
            last = time.perf_counter()
            if seen == 0:
                first = last
            seen += 1

    @app.timer(interval=0.5)  # type: ignore[untyped-decorator]
    async def report_when_idle() -> None:
        if seen > 1 and time.perf_counter() - last > 2.0:
            print(f"events/s {(seen - 1) / (last - first):.0f} {seen}", flush=True)

    faust.Worker(app, loglevel="warning", override_logging=False, quiet=True).execute_from_commandline()


if __name__ == "__main__":
    main()
