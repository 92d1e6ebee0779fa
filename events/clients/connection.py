"""How a producer that no command line configures (the Inspect hook, running inside
`inspect eval`) reaches the broker: the EVALSTREAM_* variables of the worker's settings
(worker/settings.py), security from `events.clients.security`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from events.clients.security import Security


@dataclass(frozen=True)
class Connection:
    bootstrap: str = "127.0.0.1:9092"
    events_topic: str = "evalstream.events"
    client_options: Mapping[str, Any] = field(default_factory=dict)
    """aiokafka keyword arguments beyond the bootstrap servers (security)."""


def from_environment(environ: Mapping[str, str] = os.environ) -> Connection:
    def env(name: str, default: str = "") -> str:
        return environ.get(f"EVALSTREAM_{name}", default)

    return Connection(
        bootstrap=env("BOOTSTRAP", Connection.bootstrap),
        events_topic=env("EVENTS_TOPIC", Connection.events_topic),
        client_options=Security.from_env(environ).options(),
    )
