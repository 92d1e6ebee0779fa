"""The EVALSTREAM_* connection variables as a producer inside another tool reads them."""

from __future__ import annotations

import ssl

from events.clients.connection import Connection, from_environment
from events.clients.security import Security
from worker.settings import Settings


def test_nothing_set_is_the_local_broker_and_the_default_topic() -> None:
    assert from_environment({}) == Connection("127.0.0.1:9092", "evalstream.events", {"security_protocol": "PLAINTEXT"})


def test_the_variables_are_the_workers_and_mean_what_they_mean_there() -> None:
    environ = {
        "EVALSTREAM_BOOTSTRAP": "kafka:9093",
        "EVALSTREAM_EVENTS_TOPIC": "team.events",
        "EVALSTREAM_SECURITY_PROTOCOL": "SASL_SSL",
        "EVALSTREAM_SASL_MECHANISM": "SCRAM-SHA-512",
        "EVALSTREAM_SASL_USERNAME": "me",
        "EVALSTREAM_SASL_PASSWORD": "secret",
    }
    connection = from_environment(environ)
    assert (connection.bootstrap, connection.events_topic) == ("kafka:9093", "team.events")
    options = dict(connection.client_options)
    assert isinstance(options.pop("ssl_context"), ssl.SSLContext)
    assert options == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "me",
        "sasl_plain_password": "secret",
    }
    security = Security(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="me", sasl_password="secret")
    worker = Settings(bootstrap="kafka:9093", security=security).client_options()
    assert worker.pop("bootstrap_servers") == "kafka:9093"
    assert worker.keys() == {**options, "ssl_context": None}.keys()
