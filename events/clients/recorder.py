"""`RunRecorder`: what a harness calls to publish its run to evalstream.

Every event is validated against the v1 contract before it is sent (a mistake raises in
the harness, not in the worker), keyed by run_id so that the run keeps its order, and
given an event_id (pass your own to make a retried call idempotent) and an `occurred_at` of
the moment it is sent.

    async with AsyncRunRecorder("run-7", bootstrap="kafka:9092") as run:
        await run.started(tasks=[...], attempts_per_task=3)
        await run.trial_finished("nda", "nda__1")
        await run.score("nda", "nda__1", "reward", {"score": 1.0})
        await run.trial_died("nda", "nda__2", metrics=["reward"], error_type="SandboxTimeout")
        await run.closed()

`RunRecorder` is the same with plain (blocking) methods.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaProducer

from events.clients.kafka import started
from events.clients.loop import LoopThread
from events.codec import MAX_EVENT_BYTES, encode, from_object
from events.models import InputEvent

Send = Callable[[bytes, bytes], Awaitable[None]]
"""Sends one (key, value) message to the events topic."""


class AsyncRunRecorder:
    """Publishes one run's events, for asyncio harnesses (`async with`).

    `bootstrap` and `topic` say where the events go (default: a local broker's
    `evalstream.events`); `client_options` are passed to aiokafka's producer (TLS and SASL:
    `Security.options()`); `send`, instead of a producer, takes each (key, value) message
    itself (a file, a test). Each method validates its event, sends it and returns it.
    """

    def __init__(
        self,
        run_id: str,
        *,
        bootstrap: str = "127.0.0.1:9092",
        topic: str = "evalstream.events",
        send: Send | None = None,
        **client_options: Any,
    ) -> None:
        self.run_id = run_id
        self._topic = topic
        self._producer: AIOKafkaProducer | None = None
        if send is None:
            self._producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                enable_idempotence=True,
                max_request_size=MAX_EVENT_BYTES + 4096,
                **client_options,
            )
        self._send = send

    async def __aenter__(self) -> AsyncRunRecorder:
        if self._producer is not None:
            await started(self._producer)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._producer is not None:
            await self._producer.stop()

    async def emit(self, kind: str, event_id: str | None = None, **fields: Any) -> InputEvent:
        """Validate and send one event of this run; returns it as sent."""
        # Stamped as sent unless the caller says when it happened: the worker's ETA is read off
        # the span of the stamps (the fold has no clock of its own).
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
        body = {"schema_version": 1, "type": kind, "run_id": self.run_id, "occurred_at": stamp, **fields}
        body["event_id"] = event_id or f"{self.run_id}:{uuid.uuid4().hex}"
        event = from_object({key: value for key, value in body.items() if value is not None})
        await self.send(event)
        return event

    async def send(self, event: InputEvent) -> None:
        """Send one event already built (an importer's conversion); it must be of this run."""
        if event.run_id != self.run_id:
            raise ValueError(f"event {event.event_id!r} is of run {event.run_id!r}, not of {self.run_id!r}")
        key, value = self.run_id.encode(), encode(event)
        if self._send is not None:
            await self._send(key, value)
        else:
            assert self._producer is not None
            await self._producer.send_and_wait(self._topic, value=value, key=key)

    async def started(
        self,
        tasks: Iterable[Mapping[str, Any]],
        *,
        attempts_per_task: int | None = None,
        labels: Mapping[str, str] | None = None,
        event_id: str | None = None,
    ) -> InputEvent:
        """The run's declaration: its tasks (`{"task_id": ..., ...}` each, EVENTS.md), the attempts
        planned per task (for progress and the ETA) and its labels (`benchmark`, `model`, ...)."""
        return await self.emit(
            "run.started",
            event_id,
            tasks=list(tasks),
            attempts_per_task=attempts_per_task,
            labels=dict(labels) if labels else None,
        )

    async def trial_finished(
        self, task_id: str, trial_id: str, *, usage: Mapping[str, Any] | None = None, event_id: str | None = None
    ) -> InputEvent:
        """A trial that ran to its end (its scores follow with `score`), with its token usage if known."""
        return await self.emit(
            "trial.finished", event_id, task_id=task_id, trial_id=trial_id, status="completed", usage=usage
        )

    async def score(
        self,
        task_id: str,
        trial_id: str,
        metric_type: str,
        outputs: Mapping[str, Any],
        *,
        partial: bool = False,
        event_id: str | None = None,
    ) -> InputEvent:
        """A metric's outputs for a trial, `{output name: value}`; `partial`: more outputs of the
        same metric follow in another event."""
        return await self.emit(
            "score.emitted",
            event_id,
            task_id=task_id,
            trial_id=trial_id,
            metric_type=metric_type,
            status="partial" if partial else "completed",
            outputs=[{"name": name, "value": value} for name, value in outputs.items()],
        )

    async def metric_failed(
        self,
        task_id: str,
        trial_id: str,
        metric_type: str,
        *,
        error_type: str | None = None,
        message: str | None = None,
    ) -> InputEvent:
        """The metric itself broke (a judge timed out): the attempt is unmeasured."""
        return await self.emit(
            "score.emitted",
            task_id=task_id,
            trial_id=trial_id,
            metric_type=metric_type,
            status="failed",
            failure="metric",
            error=_error(error_type, message),
        )

    async def trial_died(
        self,
        task_id: str,
        trial_id: str,
        *,
        metrics: Iterable[str],
        error_type: str | None = None,
        message: str | None = None,
    ) -> list[InputEvent]:
        """The trial died: its failed trial.finished and a failed/trial score per metric, in one call."""
        error = _error(error_type, message)
        sent = [await self.emit("trial.finished", task_id=task_id, trial_id=trial_id, status="failed", error=error)]
        for metric_type in metrics:
            sent.append(
                await self.emit(
                    "score.emitted",
                    task_id=task_id,
                    trial_id=trial_id,
                    metric_type=metric_type,
                    status="failed",
                    failure="trial",
                    error=error,
                )
            )
        return sent

    async def closed(self, reason: str = "completed", *, event_id: str | None = None) -> InputEvent:
        """The run's end (`completed`, `cancelled` or `failed`): the worker publishes its summary."""
        return await self.emit("run.closed", event_id, reason=reason)


def _error(error_type: str | None, message: str | None) -> dict[str, str] | None:
    if error_type is None and message is None:
        return None
    return {key: value for key, value in (("type", error_type), ("message", message)) if value is not None}


class RunRecorder:
    """`AsyncRunRecorder` for synchronous harnesses: its own event loop on a thread (`events.clients.loop`)."""

    def __init__(self, run_id: str, **options: Any) -> None:
        self._loop = LoopThread(f"evalstream-{run_id}")
        self._call = self._loop.call
        self._async = self._call(_make(run_id, options))

    def __enter__(self) -> RunRecorder:
        try:
            self._call(self._async.__aenter__())
        except BaseException:
            self._loop.close()  # a recorder that could not connect leaves no loop behind
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        try:
            self._call(self._async.__aexit__(kind, error, trace))
        finally:
            self._loop.close()

    def started(self, tasks: Iterable[Mapping[str, Any]], **options: Any) -> InputEvent:
        return self._call(self._async.started(tasks, **options))

    def trial_finished(self, task_id: str, trial_id: str, **options: Any) -> InputEvent:
        return self._call(self._async.trial_finished(task_id, trial_id, **options))

    def score(
        self, task_id: str, trial_id: str, metric_type: str, outputs: Mapping[str, Any], **options: Any
    ) -> InputEvent:
        return self._call(self._async.score(task_id, trial_id, metric_type, outputs, **options))

    def metric_failed(self, task_id: str, trial_id: str, metric_type: str, **options: Any) -> InputEvent:
        return self._call(self._async.metric_failed(task_id, trial_id, metric_type, **options))

    def trial_died(self, task_id: str, trial_id: str, **options: Any) -> list[InputEvent]:
        return self._call(self._async.trial_died(task_id, trial_id, **options))

    def closed(self, reason: str = "completed", **options: Any) -> InputEvent:
        return self._call(self._async.closed(reason, **options))


async def _make(run_id: str, options: dict[str, Any]) -> AsyncRunRecorder:
    # Built on the recorder's own loop: aiokafka binds its producer to the loop it is created on.
    return AsyncRunRecorder(run_id, **options)
