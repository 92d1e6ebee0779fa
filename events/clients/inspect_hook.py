"""An Inspect AI hook that publishes each sample's events to evalstream as it finishes, so
that `evalstream watch` follows an Inspect eval live.

Installed with `pip install 'evalstream[inspect]'`, whose entry point (group `inspect_ai`)
is how Inspect finds hooks; enabled per eval by `EVALSTREAM_INSPECT_HOOK=1`, and connected
by the worker's variables: EVALSTREAM_BOOTSTRAP, EVALSTREAM_EVENTS_TOPIC and the
EVALSTREAM_SECURITY_PROTOCOL / SASL_* / SSL_CAFILE ones (`events.clients.connection`).

Each task of the eval is a run: run.started when the task starts, a sample's trial and
scores when it ends, run.closed when the task ends. The events are those that
`evalstream import inspect` makes of the log the eval writes (`inspect_events`, one
conversion), with the same ids, so importing that log afterwards is a redelivery. Their
order is the order Inspect reports samples ending; the importer orders by each sample's
`completed_at`, which is the same order unless samples end within the same instant.
A broker that cannot be reached costs a warning, never the eval; a sample only some of
whose events went out is named in it, with how many did. An eval that ends without
telling its hooks how (a ^C, a killed process) leaves its run open: importing its log
afterwards (`evalstream import inspect LOG --publish`) closes it, and changes nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.hooks import Hooks, RunEnd, SampleEnd, TaskEnd, TaskStart, hooks

from events.clients.connection import from_environment
from events.clients.recorder import AsyncRunRecorder
from events.clients.security import SecurityError
from events.importers import inspect_events
from events.models import InputEvent

ENABLE = "EVALSTREAM_INSPECT_HOOK"
logger = logging.getLogger(__name__)


@dataclass
class _Run:
    spec: dict[str, Any]
    recorder: AsyncRunRecorder
    where: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Publishes one sample's events at a time, in the order Inspect reports them."""


@hooks(name="evalstream", description="Publishes each sample's events to evalstream as it finishes.")
class EvalstreamHook(Hooks):
    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}

    def enabled(self) -> bool:
        return os.environ.get(ENABLE, "").strip().lower() in {"1", "true", "yes", "on"}

    async def on_task_start(self, data: TaskStart) -> None:
        spec = json.loads(data.spec.model_dump_json(include=set(inspect_events.SPEC_FIELDS)))
        run_id = inspect_events.run_id(spec)
        try:
            connection = from_environment()
        except SecurityError as error:
            logger.warning(f"evalstream: not publishing run {run_id}: {error}")
            return
        where = f"{connection.events_topic} at {connection.bootstrap}"
        recorder = AsyncRunRecorder(
            run_id, bootstrap=connection.bootstrap, topic=connection.events_topic, **connection.client_options
        )
        try:
            await recorder.__aenter__()
        except Exception as error:
            logger.warning(f"evalstream: cannot publish run {run_id} to {where} ({error}); {_afterwards()}")
            with contextlib.suppress(Exception):
                await recorder.__aexit__(None, None, None)
            return
        run = self._runs[data.eval_id] = _Run(spec, recorder, where)
        # At warning level because that is what Inspect shows by default: the user needs the id to watch.
        logger.warning(f"evalstream: publishing run {run_id} to {where}; follow it with `evalstream watch {run_id}`")
        await self._publish(run, [inspect_events.run_started(spec)])

    async def on_sample_end(self, data: SampleEnd) -> None:
        run = self._runs.get(data.eval_id)
        if run is not None:
            sample = json.loads(data.sample.model_dump_json(include=set(inspect_events.SAMPLE_FIELDS)))
            events = list(inspect_events.sample_events(run.spec, sample))
            await self._publish(run, events, f"sample {sample.get('id')!r} epoch {sample.get('epoch')}")

    async def on_task_end(self, data: TaskEnd) -> None:
        await self._close(data.eval_id, data.log.status)

    async def on_run_end(self, data: RunEnd) -> None:
        # Tasks whose end was not reported on its own (Inspect 0.3.130 on a task that errored):
        # closed as the run's logs say; a run with no log (a ^C) stays open until its log is imported.
        statuses = {log.eval.eval_id: log.status for log in data.logs}
        for eval_id in list(self._runs):
            await self._close(eval_id, statuses.get(eval_id, "started"))

    async def _close(self, eval_id: str, status: str) -> None:
        run = self._runs.pop(eval_id, None)
        if run is None:
            return
        try:
            closed = inspect_events.run_closed(run.spec, status)
            if closed is not None:
                await self._publish(run, [closed])
        finally:
            await run.recorder.__aexit__(None, None, None)

    async def _publish(self, run: _Run, events: Sequence[InputEvent], sample: str | None = None) -> None:
        """Send `events` in order; a failure costs a warning, which names the sample (when
        given) and how many of its events went out before it: its run lacks the rest."""
        async with run.lock:
            sent = 0
            try:
                for event in events:
                    await run.recorder.send(event)
                    sent += 1
            except Exception as error:
                if sample is not None:
                    logger.warning(
                        f"evalstream: run {run.recorder.run_id}: {sent} of the {len(events)} events of {sample} "
                        f"were published when sending to {run.where} failed ({error}); {_afterwards()}"
                    )
                else:
                    logger.warning(f"evalstream: cannot publish to {run.where} ({error}); {_afterwards()}")


def _afterwards() -> str:
    return "the eval goes on; import its log when it is done: evalstream import inspect LOG --publish"
