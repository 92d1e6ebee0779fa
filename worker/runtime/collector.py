"""The cyclic garbage collector, kept from stalling the worker's event loop.

Measured with `gc.callbacks` in a worker under bench.e2e's 10,000 events/s run (one run of
6,667 tasks): every full collection found nothing to collect (the fold's state holds no
reference cycles), yet each walked every live object, 400,000 for that one run, in up to
290 ms, ten times in 20 s, as the growing state kept passing CPython's rule of a full
collection once the long-lived objects grow by a quarter. Young collections stay as they
are: they are cheap, and they are where the short-lived cycles of asyncio and aiokafka die.
"""

from __future__ import annotations

import gc

FULL_EVERY = 10_000
"""Middle-generation collections between two full ones (CPython's default: 10). At 10,000
events/s that is a full collection about every 12 minutes instead of every 2 seconds; the
rare cycle that reaches the old generation is still reclaimed, later."""


def quiet_collector() -> None:
    """Freeze what exists now (modules, the app: never garbage) out of every later
    collection, and make full collections rare. Call once, when the worker is built."""
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_EVERY)
