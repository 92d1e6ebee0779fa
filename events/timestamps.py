"""RFC 3339 timestamps (`occurred_at`): checked as EVENTS.md requires, read as epoch seconds.

The rule: the shape of RFC 3339 with a time zone (the pattern), then a moment that exists
(`datetime.fromisoformat`: no 13th month, no 24th hour). A leap second (second 60, which RFC
3339 allows, e.g. `2016-12-31T23:59:60Z`) is read as the second after it (`2017-01-01T00:00:00Z`,
as POSIX time counts it): the event is valid, and its value is kept as written. Decoding an
event checks its timestamp and keeps the moment read on the event (`events.models.MOMENT`),
where the fold reads it without a second parse.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Final

PROBLEM: Final = "must be an RFC 3339 timestamp with a time zone, e.g. 2026-11-30T12:00:00Z"

# Any script's digits, as the rule always read them: datetime refuses them where it reads a
# number, but takes them as a fraction's digits past the sixth, which it ignores.
_PATTERN: Final = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)")
_SECOND: Final = timedelta(seconds=1)


def rfc3339(value: str) -> str:
    """`value` unchanged, when it is an RFC 3339 timestamp with a time zone (pydantic's
    validator for `occurred_at`: kept as written, so that the event round-trips byte for byte)."""
    epoch_seconds(value)
    return value


def epoch_seconds(value: str) -> float:
    """Seconds since the epoch of an RFC 3339 timestamp with a time zone (a leap second read
    as the next second); ValueError if `value` is not one."""
    if _PATTERN.fullmatch(value) is None:
        raise ValueError(PROBLEM)
    text = value.upper()
    leap = text[17:19] == "60"  # the seconds, where the pattern puts them
    try:
        moment = datetime.fromisoformat(f"{text[:17]}59{text[19:]}" if leap else text)
        return (moment + _SECOND if leap else moment).timestamp()
    except (ValueError, OverflowError):  # OverflowError: the second after 9999-12-31T23:59:60
        raise ValueError(PROBLEM) from None
