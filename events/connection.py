"""How a client reaches the broker: aiokafka's security options, and the EVALSTREAM_*
variables that say so for a producer that no command line configures (the Inspect hook,
running inside `inspect eval`). Names and defaults are the worker's (worker/settings.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def security_options(
    protocol: str, *, mechanism: str = "PLAIN", username: str = "", password: str = "", cafile: str = ""
) -> dict[str, Any]:
    """aiokafka keyword arguments for `protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)."""
    options: dict[str, Any] = {"security_protocol": protocol}
    if protocol.startswith("SASL"):
        options.update(sasl_mechanism=mechanism, sasl_plain_username=username, sasl_plain_password=password)
    if "SSL" in protocol:
        from aiokafka.helpers import create_ssl_context

        options["ssl_context"] = create_ssl_context(cafile=cafile or None)
    return options


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
        client_options=security_options(
            env("SECURITY_PROTOCOL", "PLAINTEXT"),
            mechanism=env("SASL_MECHANISM", "PLAIN"),
            username=env("SASL_USERNAME"),
            password=env("SASL_PASSWORD"),
            cafile=env("SSL_CAFILE"),
        ),
    )
