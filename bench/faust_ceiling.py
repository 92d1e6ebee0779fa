"""faust's own ceiling: the rate at which a faust agent that does nothing consumes a topic.

Run by `bench.e2e` as a subprocess (`python -m bench.faust_ceiling BOOTSTRAP TOPIC COUNT`);
prints `events/s <rate>` once COUNT events have passed through the agent (the caller then
stops it). It separates
what faust costs per message from what the worker adds.
"""

from __future__ import annotations

import sys
import time
import uuid

import faust


def main() -> None:
    bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    app = faust.App(
        f"faust-ceiling-{uuid.uuid4().hex[:8]}",
        broker=f"kafka://{bootstrap}",
        store="memory://",
        key_serializer="raw",
        value_serializer="raw",
        web_enabled=False,
        consumer_auto_offset_reset="earliest",
    )
    source = app.topic(topic, key_type=bytes, value_type=bytes)
    seen = 0
    began = 0.0

    @app.agent(source)
    async def count_events(stream: faust.StreamT[bytes]) -> None:
        nonlocal seen, began
        async for _ in stream.events():
            if seen == 0:
                began = time.perf_counter()
            seen += 1
            if seen == count:
                print(f"events/s {count / (time.perf_counter() - began):.0f}", flush=True)

    faust.Worker(app, loglevel="warning", override_logging=False, quiet=True).execute_from_commandline()


if __name__ == "__main__":
    main()
