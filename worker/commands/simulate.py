"""`evalstream simulate`: a synthetic eval run published live, paced like a harness.

Each event is stamped with `occurred_at` as it is sent, as a harness stamps what it saw
happen: the worker's ETA comes from the span of those stamps (SEMANTICS.md says no summary
figure depends on them, so the summary is the same as the unstamped log's).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import orjson
from aiokafka import AIOKafkaProducer

from events.clients.kafka import running
from events.codec import MAX_EVENT_BYTES
from events.synthetic import synthetic_run
from worker.settings import Settings


async def simulate(
    settings: Settings,
    run_id: str,
    *,
    tasks: int,
    attempts: int,
    pace: float,
    trial_failure_rate: float,
    metric_failure_rate: float,
    seed: int,
) -> int:
    """Publish the run's events at about `pace` events per second; returns how many."""
    producer = AIOKafkaProducer(**settings.client_options(), enable_idempotence=True, max_request_size=MAX_EVENT_BYTES)
    sent = 0
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with running(producer):
        events = synthetic_run(
            run_id,
            tasks=tasks,
            attempts=attempts,
            trial_failure_rate=trial_failure_rate,
            metric_failure_rate=metric_failure_rate,
            seed=seed,
        )
        for event in events:
            event["occurred_at"] = datetime.now(UTC).isoformat(timespec="milliseconds")
            await producer.send(settings.events_topic, value=orjson.dumps(event), key=run_id.encode())
            sent += 1
            ahead = began + sent / pace - loop.time()
            if ahead > 0:
                await asyncio.sleep(ahead)
        await producer.flush()
    return sent
