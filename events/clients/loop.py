"""An event loop on a thread of its own: what the blocking clients (`RunRecorder`,
`SummarySubscriber`) run their asyncio twins on.

A thread, not `asyncio.run` per call: aiokafka binds a client to the loop it starts on, so one
loop must outlive the calls, and a thread keeps working where the caller already runs a loop
(a notebook, a harness built on asyncio).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop and wait for its result."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # interrupted (Ctrl-C): do not leave the call running on the loop
            raise

    def close(self) -> None:
        self.call(self._loop.shutdown_asyncgens())  # iterations left unfinished end here, on their loop
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
