"""The security settings every client shares: read from EVALSTREAM_*, checked before any
connection, turned into aiokafka's options with the password in no repr."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.clients.security import MECHANISMS, PROTOCOLS, Security, SecurityError
from worker.local import certs

PASSWORD = "s3cr3t-Hunter2!"
stripped = st.text(st.characters(exclude_categories=["Cc", "Cs"]), max_size=20).map(str.strip)


@given(
    protocol=st.sampled_from(PROTOCOLS),
    mechanism=st.sampled_from(MECHANISMS),
    username=stripped,
    password=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=20),
    files=st.tuples(stripped, stripped, stripped),
    check_hostname=st.booleans(),
)
def test_settings_come_back_from_their_variables(
    *,
    protocol: str,
    mechanism: str,
    username: str,
    password: str,
    files: tuple[str, str, str],
    check_hostname: bool,
) -> None:
    security = Security(protocol, mechanism, username, password, *files, ssl_check_hostname=check_hostname)
    assert Security.from_env(security.env()) == security


def test_the_password_is_in_no_repr() -> None:
    security = Security("SASL_SSL", "SCRAM-SHA-512", "worker", PASSWORD, "/ca.pem")
    assert "worker" in repr(security)
    assert PASSWORD not in repr(security)
    assert PASSWORD not in str(security)


def test_the_defaults_are_plaintext_and_unset_variables() -> None:
    assert Security.from_env({}) == Security()
    assert Security().options() == {"security_protocol": "PLAINTEXT"}


def test_sasl_options_carry_the_user_and_tls_a_verifying_context(tmp_path: Path) -> None:
    ca = certs.authority(tmp_path)
    options = Security("SASL_SSL", "SCRAM-SHA-256", "reader", PASSWORD, str(ca.cert)).options()
    context = options.pop("ssl_context")
    assert options == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "reader",
        "sasl_plain_password": PASSWORD,
    }
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname  # on unless turned off
    assert [cert["subject"] for cert in context.get_ca_certs()] == [((("commonName", "evalstream local CA"),),)]


def test_the_host_name_check_can_be_turned_off_and_the_certificate_is_still_verified() -> None:
    context = Security.from_env(
        {"EVALSTREAM_SECURITY_PROTOCOL": "ssl", "EVALSTREAM_SSL_CHECK_HOSTNAME": "false"}
    ).ssl_context()
    assert not context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED


def encrypted_key(directory: Path) -> Path:
    key = directory / "encrypted.key"
    command = ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-aes-128-cbc"]
    subprocess.run([*command, "-pass", "pass:x", "-out", str(key)], check=True, capture_output=True)
    return key


def test_wrong_settings_name_the_variable(tmp_path: Path) -> None:
    ca = certs.authority(tmp_path)
    cases: dict[str, tuple[dict[str, str], str]] = {
        "protocol": ({"SECURITY_PROTOCOL": "TLS"}, "EVALSTREAM_SECURITY_PROTOCOL='TLS': give one of PLAINTEXT, SSL"),
        "mechanism": (
            {"SECURITY_PROTOCOL": "SASL_SSL", "SASL_MECHANISM": "GSSAPI", "SASL_USERNAME": "u", "SASL_PASSWORD": "p"},
            "EVALSTREAM_SASL_MECHANISM='GSSAPI': give one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
        ),
        "no user": (
            {"SECURITY_PROTOCOL": "SASL_PLAINTEXT"},
            "set EVALSTREAM_SASL_USERNAME and EVALSTREAM_SASL_PASSWORD",
        ),
        "no such CA file": (
            {"SECURITY_PROTOCOL": "SSL", "SSL_CAFILE": "/nonexistent/ca.pem"},
            "EVALSTREAM_SSL_CAFILE=/nonexistent/ca.pem: not a readable PEM CA file",
        ),
        "a key without its certificate": (
            {"SECURITY_PROTOCOL": "SSL", "SSL_KEYFILE": str(ca.key)},
            "EVALSTREAM_SSL_KEYFILE is set without EVALSTREAM_SSL_CERTFILE",
        ),
        "a certificate without its key": (
            {"SECURITY_PROTOCOL": "SSL", "SSL_CERTFILE": str(ca.cert)},
            "not a readable PEM certificate and unencrypted key",
        ),
        "an encrypted key": (
            {"SECURITY_PROTOCOL": "SSL", "SSL_CERTFILE": str(ca.cert), "SSL_KEYFILE": str(encrypted_key(tmp_path))},
            "EVALSTREAM_SSL_KEYFILE is encrypted",  # and no prompt on the terminal
        ),
        "TLS files without TLS": ({"SSL_CAFILE": str(ca.cert)}, "EVALSTREAM_SECURITY_PROTOCOL is PLAINTEXT"),
        "a check that is no boolean": ({"SSL_CHECK_HOSTNAME": "maybe"}, "EVALSTREAM_SSL_CHECK_HOSTNAME='maybe'"),
    }
    for name, (variables, message) in cases.items():
        with pytest.raises(SecurityError) as raised:
            Security.from_env({f"EVALSTREAM_{key}": value for key, value in variables.items()}).options()
        assert message in str(raised.value), name
