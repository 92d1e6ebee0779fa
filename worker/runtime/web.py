"""The worker's web port: `/ready`, `/live` and `/metrics`, and nothing else.

faust's web server serves views of its own: `/`, `/router/`, `/table/{name}/{key}/` (any
run's stored state, to whoever reaches the port), `/stats/`, `/graph/`. They are all
turned off by giving the server no blueprints; it binds `EVALSTREAM_WEB_HOST` only. The
three paths answer GET and HEAD (another method gets 405, another path 404):

- `/live`: 200 while the worker's event loop answers. The loop that serves it is the one
  the engine runs on, so a loop stuck in a batch fails it; a rebalance or a restore does not.
- `/ready`: 200 once the partitions of the last assignment are restored from the changelog
  and sought to their checkpoints (also with no partitions: an idle worker is healthy),
  else 503 with the reason. The web server starts before the consumer, so both answer
  while the state is being restored.
- `/metrics`: `worker.runtime.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import faust
from faust.web.base import BlueprintManager

from worker.runtime.metrics import CONTENT_TYPE, WorkerMetrics


def serve(app: faust.App, not_ready: Callable[[], str | None], metrics: WorkerMetrics) -> None:
    """Serve the three views on `app`'s web server (before it starts). `not_ready`: why the
    worker is not ready, or None when it is."""
    app.web.blueprints = BlueprintManager()

    @app.page("/live")
    async def live(view: Any, request: Any) -> Any:
        return view.text("live\n")

    @app.page("/ready")
    async def ready(view: Any, request: Any) -> Any:
        reason = not_ready()
        if reason is None:
            return view.text("ready\n")
        return view.text(f"not ready: {reason}\n", status=503)

    @app.page("/metrics")
    async def scrape(view: Any, request: Any) -> Any:
        return view.bytes(metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})
