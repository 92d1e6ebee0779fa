"""Secrets never reach the worker's log: a filter on the log's handlers that masks them.

aiokafka logs every request at debug level, the SASL handshake's included, whose bytes hold
the password (`SaslAuthenticateRequest(auth_bytes=b'\\x00user\\x00password')`); a library's
error message could quote one too. The filter masks each secret, as text and as it shows
inside a bytes or str repr, in every record's message and traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

MASK = "***"


class Redact(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        forms = set()
        for secret in secrets:
            if secret:
                forms |= {secret, repr(secret.encode())[2:-1], repr(secret)[1:-1]}
        self.forms = sorted(forms, key=len, reverse=True)
        """Longest first, so that a form containing another is masked whole."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.forms:
            return True
        message = record.getMessage()
        if any(form in message for form in self.forms):
            record.msg, record.args = self._masked(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._masked(record.exc_text)
        return True

    def _masked(self, text: str) -> str:
        for form in self.forms:
            text = text.replace(form, MASK)
        return text


def install(secrets: Iterable[str]) -> None:
    """Mask `secrets` in whatever the root logger's handlers write."""
    redact = Redact(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redact)
