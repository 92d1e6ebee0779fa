"""What to tell a user whom a Kafka cluster refused: the cause named (authentication failed,
certificate not trusted, not authorised for topic X), where, and which setting to change.

`worker.commands.cli.explained` asks here before its general Kafka messages. The errors come from
aiokafka and ssl, found by `events.clients.kafka.bootstrapped` when a client cannot bootstrap. What
is said names the user, the mechanism, files and the broker's own reason, never the password.
"""

from __future__ import annotations

import ssl

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    IllegalSaslStateError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
    UnsupportedSaslMechanismError,
)

from events.clients.kafka import ConnectionClosed
from worker.runtime.topics import TopicsRefused
from worker.settings import Settings

HOST_MISMATCH = {62, 64}  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
CLIENT_CERTIFICATE_REFUSED = {
    "SSLV3_ALERT_BAD_CERTIFICATE",
    "TLSV13_ALERT_CERTIFICATE_REQUIRED",
    "TLSV1_ALERT_UNKNOWN_CA",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
}
NOT_TLS = {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"}
FIX_ACL = "ask the cluster's admin for an ACL, or connect as a user that has one"


def refusal(error: BaseException, settings: Settings) -> str | None:
    """The sentence for `error` if a broker refused this client (TLS, SASL, ACLs), else None."""
    where, security = settings.bootstrap, settings.security
    who = f"user {security.sasl_username!r}" if security.sasl else "this client (no SASL user)"
    if isinstance(error, SaslAuthenticationFailed):
        return (
            f"authentication failed for user {security.sasl_username!r} ({security.sasl_mechanism}) at {where}: "
            f"{_reason(error)}. Check EVALSTREAM_SASL_USERNAME, EVALSTREAM_SASL_PASSWORD and EVALSTREAM_SASL_MECHANISM."
        )
    if isinstance(error, UnsupportedSaslMechanismError | IllegalSaslStateError):
        return f"authentication failed at {where}: {_reason(error)}; set EVALSTREAM_SASL_MECHANISM to one it enables."
    if isinstance(error, ssl.SSLCertVerificationError):
        return _untrusted(error, where, security.ssl_cafile)
    if isinstance(error, ssl.SSLError):
        reason = (error.reason or str(error)).lower().replace("_", " ")
        if error.reason in CLIENT_CERTIFICATE_REFUSED:
            given = f"now {security.ssl_certfile}" if security.ssl_certfile else "none given"
            return (
                f"the broker at {where} refused this client's TLS certificate ({reason}; {given}): it wants one "
                "signed by a CA it trusts. Set EVALSTREAM_SSL_CERTFILE and EVALSTREAM_SSL_KEYFILE."
            )
        if error.reason in NOT_TLS:
            return (
                f"the TLS handshake with {where} failed ({reason}): nothing speaks TLS there. Check "
                f"EVALSTREAM_SECURITY_PROTOCOL (now {security.protocol}) and the port."
            )
        return f"the TLS connection to {where} failed ({reason})."
    if isinstance(error, ConnectionClosed):
        return (
            f"the broker at {where} closed the connection before answering: it expects another protocol than "
            f"EVALSTREAM_SECURITY_PROTOCOL={security.protocol}. Set it to the listener's (a secured one also needs "
            'EVALSTREAM_SASL_* and EVALSTREAM_SSL_*: docs/operations.md, "Secured clusters").'
        )
    if isinstance(error, TopicsRefused):
        topics, them = _listed("topic", error)
        return (
            f"not authorised for {topics}: {who} may neither see nor create {them} at {where}; {FIX_ACL} "
            "(or, if it does not exist yet, start the worker: it creates its topics)."
        )
    if isinstance(error, TopicAuthorizationFailedError):
        topics, them = _listed("topic", error)
        return f"not authorised for {topics}: {who} may not use {them} at {where}; {FIX_ACL}."
    if isinstance(error, GroupAuthorizationFailedError):
        groups, them = _listed("consumer group", error)
        return f"not authorised for {groups}: {who} may not join {them} at {where}; {FIX_ACL}."
    if isinstance(error, ClusterAuthorizationFailedError):
        return f"not authorised on the cluster at {where}: {who} lacks a cluster ACL this needs; {FIX_ACL}."
    return None


def _untrusted(error: ssl.SSLCertVerificationError, where: str, cafile: str) -> str:
    detail = error.verify_message or error.reason or str(error)
    if error.verify_code in HOST_MISMATCH:
        return (
            f"certificate not trusted: the broker at {where} presented a certificate for another host ({detail}). "
            "Connect by a name the certificate holds, or set EVALSTREAM_SSL_CHECK_HOSTNAME=false to accept it."
        )
    trusted = cafile or "the system's CAs"
    return (
        f"certificate not trusted: the TLS certificate of the broker at {where} did not verify against {trusted} "
        f"({detail}). Set EVALSTREAM_SSL_CAFILE to the PEM file of the CA that signed it."
    )


def _reason(error: BaseException) -> str:
    return str(error.args[0]) if error.args else type(error).__name__


def _listed(kind: str, error: BaseException) -> tuple[str, str]:
    """("topic 'a'", "it") or ("topics 'a', 'b'", "them"): what an authorization error is
    about (aiokafka gives one name, or a set)."""
    named = error.args[0] if error.args else "?"
    names = sorted(named) if isinstance(named, set | frozenset | list | tuple) else [str(named)]
    listed = ", ".join(repr(name) for name in names)
    return (f"{kind} {listed}", "it") if len(names) == 1 else (f"{kind}s {listed}", "them")
