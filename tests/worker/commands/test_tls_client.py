"""A client's own TLS checks, against a TLS server that is not Kafka: the host name is
verified unless EVALSTREAM_SSL_CHECK_HOSTNAME=false says not to, and the password given in
the environment shows in no output, --help included."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from events.clients.security import Security
from tests.worker.commands.test_cli import NOISE, commands
from worker.local import certs
from worker.local.processes import free_port
from worker.settings import Settings

PASSWORD = "s3cr3t-Hunter2!"


@contextlib.contextmanager
def tls_server(issued: certs.Issued) -> Iterator[int]:
    """The port of a server on 127.0.0.1 that completes a TLS handshake with `issued` and hangs up."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(issued.cert, issued.key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stopped = threading.Event()

    def serve() -> None:
        while not stopped.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            with raw:
                raw.settimeout(5)
                with contextlib.suppress(OSError):  # a client that gave up during the handshake
                    context.wrap_socket(raw, server_side=True).close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stopped.set()
        thread.join(5)
        listener.close()


def summaries(port: int, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("EVALSTREAM_")}
    env |= {f"EVALSTREAM_{key}": value for key, value in variables.items()}
    command = [sys.executable, "-m", "worker.commands.cli", "summaries", "--bootstrap", f"127.0.0.1:{port}"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_the_host_name_is_checked_unless_turned_off(tmp_path: Path) -> None:
    ca = certs.authority(tmp_path)
    elsewhere = certs.issue(ca, tmp_path, "elsewhere", hosts=("elsewhere.invalid",))
    with tls_server(elsewhere) as port:
        checked = summaries(port, SECURITY_PROTOCOL="SSL", SSL_CAFILE=str(ca.cert))
        unchecked = summaries(port, SECURITY_PROTOCOL="SSL", SSL_CAFILE=str(ca.cert), SSL_CHECK_HOSTNAME="false")
    assert checked.returncode == 1
    assert (
        f"certificate not trusted: the broker at 127.0.0.1:{port} presented a certificate for another host "
        "(IP address mismatch, certificate is not valid for '127.0.0.1'.)"
    ) in checked.stderr
    assert "EVALSTREAM_SSL_CHECK_HOSTNAME=false" in checked.stderr
    # Unchecked, the certificate is still verified and TLS works: the server then hangs up.
    assert unchecked.returncode == 1
    assert f"the broker at 127.0.0.1:{port} closed the connection before answering" in unchecked.stderr
    for noise in NOISE:
        assert noise not in checked.stderr + unchecked.stderr


def test_wrong_security_settings_are_bad_usage_named_before_any_connection() -> None:
    done = summaries(free_port(), SECURITY_PROTOCOL="SASL_SSL", SASL_USERNAME="reader")
    assert done.returncode == 2
    assert done.stderr == (
        "evalstream summaries: SASL_SSL needs a user: set EVALSTREAM_SASL_USERNAME and EVALSTREAM_SASL_PASSWORD\n"
    )


@pytest.mark.parametrize("command", [*commands(), None])
def test_help_never_shows_the_password(command: str | None) -> None:
    env = {**os.environ, "EVALSTREAM_SECURITY_PROTOCOL": "SASL_SSL", "EVALSTREAM_SASL_PASSWORD": PASSWORD}
    done = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", *([command] if command else []), "--help"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert "usage: evalstream" in done.stdout
    assert PASSWORD not in done.stdout + done.stderr


def test_the_settings_show_the_user_and_not_the_password() -> None:
    settings = Settings(security=Security("SASL_SSL", "SCRAM-SHA-512", "worker", PASSWORD))
    assert "sasl_username='worker'" in repr(settings)
    assert PASSWORD not in repr(settings)
