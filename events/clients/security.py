"""How a client connects to a secured cluster: TLS and SASL settings, read from EVALSTREAM_*
environment variables, turned into aiokafka's keyword arguments.

    security = Security.from_env()       # EVALSTREAM_SECURITY_PROTOCOL, _SASL_*, _SSL_*
    async with AsyncRunRecorder("run-7", bootstrap="kafka:9093", **security.options()) as run:
        ...

Every evalstream client takes its security from here (the worker's `Settings` too), so one
set of variables points every command, the worker, `RunRecorder` and the subscribers at the
same cluster.

| variable | meaning | default |
|---|---|---|
| EVALSTREAM_SECURITY_PROTOCOL | PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL | PLAINTEXT |
| EVALSTREAM_SASL_MECHANISM | PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 | PLAIN |
| EVALSTREAM_SASL_USERNAME, EVALSTREAM_SASL_PASSWORD | the SASL user | (none) |
| EVALSTREAM_SSL_CAFILE | PEM file of the CA(s) that signed the brokers' certificates | the system's CAs |
| EVALSTREAM_SSL_CERTFILE, EVALSTREAM_SSL_KEYFILE | this client's certificate and key (PEM), for mutual TLS | none |
| EVALSTREAM_SSL_CHECK_HOSTNAME | false: accept a trusted certificate issued for another host name | true |

Choices: the certificate is always verified (there is no setting to skip it: a CA file is
the way to trust a private CA); only the host name check can be turned off, for brokers
reached by an address their certificate does not name. The password is kept out of every
`repr`, and nothing here logs.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_BOOLEANS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


class SecurityError(ValueError):
    """The security settings are wrong or incomplete; the message names the variable."""


@dataclass(frozen=True)
class Security:
    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    ssl_check_hostname: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Security:
        """The settings of the EVALSTREAM_* variables in `environ` (default: the process's)."""
        env = os.environ if environ is None else environ

        def get(name: str, default: str = "") -> str:
            return env.get(f"EVALSTREAM_{name}", default).strip()

        check = get("SSL_CHECK_HOSTNAME", "true").lower()
        if check not in _BOOLEANS:
            raise SecurityError(f"EVALSTREAM_SSL_CHECK_HOSTNAME={check!r}: give true or false")
        return cls(
            protocol=get("SECURITY_PROTOCOL", "PLAINTEXT").upper(),
            sasl_mechanism=get("SASL_MECHANISM", "PLAIN").upper(),
            sasl_username=get("SASL_USERNAME"),
            sasl_password=env.get("EVALSTREAM_SASL_PASSWORD", ""),  # as given: spaces may be part of it
            ssl_cafile=get("SSL_CAFILE"),
            ssl_certfile=get("SSL_CERTFILE"),
            ssl_keyfile=get("SSL_KEYFILE"),
            ssl_check_hostname=_BOOLEANS[check],
        )

    def env(self) -> dict[str, str]:
        """These settings as EVALSTREAM_* variables (`from_env` reads them back), for a child
        process; it holds the password."""
        return {
            "EVALSTREAM_SECURITY_PROTOCOL": self.protocol,
            "EVALSTREAM_SASL_MECHANISM": self.sasl_mechanism,
            "EVALSTREAM_SASL_USERNAME": self.sasl_username,
            "EVALSTREAM_SASL_PASSWORD": self.sasl_password,
            "EVALSTREAM_SSL_CAFILE": self.ssl_cafile,
            "EVALSTREAM_SSL_CERTFILE": self.ssl_certfile,
            "EVALSTREAM_SSL_KEYFILE": self.ssl_keyfile,
            "EVALSTREAM_SSL_CHECK_HOSTNAME": "true" if self.ssl_check_hostname else "false",
        }

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def options(self) -> dict[str, Any]:
        """aiokafka's keyword arguments for these settings (all but `bootstrap_servers`);
        raises `SecurityError` when they do not make a connection that can work."""
        if self.protocol not in PROTOCOLS:
            raise SecurityError(f"EVALSTREAM_SECURITY_PROTOCOL={self.protocol!r}: give one of {', '.join(PROTOCOLS)}")
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            if self.sasl_mechanism not in MECHANISMS:
                raise SecurityError(
                    f"EVALSTREAM_SASL_MECHANISM={self.sasl_mechanism!r}: give one of {', '.join(MECHANISMS)}"
                )
            if not self.sasl_username or not self.sasl_password:
                raise SecurityError(
                    f"{self.protocol} needs a user: set EVALSTREAM_SASL_USERNAME and EVALSTREAM_SASL_PASSWORD"
                )
            options.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_username,
                sasl_plain_password=self.sasl_password,
            )
        if self.tls:
            options["ssl_context"] = self.ssl_context()
        elif self.ssl_cafile or self.ssl_certfile:
            raise SecurityError(
                f"EVALSTREAM_SSL_* settings are for TLS, and EVALSTREAM_SECURITY_PROTOCOL is {self.protocol}: "
                "use SSL or SASL_SSL"
            )
        return options

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that verifies the broker (against EVALSTREAM_SSL_CAFILE, else the
        system's CAs) and, given a certificate, presents it."""
        if self.ssl_keyfile and not self.ssl_certfile:
            raise SecurityError("EVALSTREAM_SSL_KEYFILE is set without EVALSTREAM_SSL_CERTFILE: set both")
        try:
            context = ssl.create_default_context(cafile=self.ssl_cafile or None)
        except (OSError, ssl.SSLError) as error:
            raise SecurityError(
                f"EVALSTREAM_SSL_CAFILE={self.ssl_cafile}: not a readable PEM CA file ({error})"
            ) from None
        if self.ssl_certfile:
            try:
                context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile or None, password=_no_password)
            except (OSError, ssl.SSLError) as error:
                raise SecurityError(
                    f"EVALSTREAM_SSL_CERTFILE={self.ssl_certfile}, EVALSTREAM_SSL_KEYFILE={self.ssl_keyfile or '-'}: "
                    f"not a readable PEM certificate and unencrypted key ({error})"
                ) from None
        context.check_hostname = self.ssl_check_hostname
        return context


def _no_password() -> str:
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key's password.
    raise SecurityError("EVALSTREAM_SSL_KEYFILE is encrypted; give an unencrypted key (openssl pkey -in KEY)")
