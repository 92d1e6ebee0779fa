"""`epoch_seconds` against the rule: RFC 3339's pattern, then
`datetime.fromisoformat(value.upper()).timestamp()` (a leap second, second 60, read as the
second after it), on values drawn near and across its bounds, each read twice (the second read
answers from the value kept); and the compiled recogniser's reading of the common forms
(`events._native.epoch_seconds_of`) against it."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import compiled
from events.builds import PURE_SETTING
from events.codec import DecodeError, decode
from events.timestamps import PROBLEM, epoch_seconds, rfc3339

PATTERN = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)")


def reference(value: str) -> float | None:
    """The moment, or None where the rule refuses the value."""
    if PATTERN.fullmatch(value) is None:
        return None
    leap = value[17:19] == "60"
    try:
        moment = datetime.fromisoformat((value[:17] + "59" + value[19:] if leap else value).upper())
        return (moment + timedelta(seconds=leap)).timestamp()
    except (ValueError, OverflowError):
        return None


def read(value: str) -> float | None:
    """The moment, or None where `epoch_seconds` refuses the value, saying why."""
    try:
        return epoch_seconds(value)
    except ValueError as error:
        said = str(error)
    assert said == PROBLEM
    return None


def bits(moment: float | None) -> bytes | None:
    return None if moment is None else struct.pack("<d", moment)


def number(low: int, high: int, width: int, past: int = 0) -> st.SearchStrategy[str]:
    """Numbers in [low, high] written in `width` digits; with `past`, as often one of the
    `past` just beyond the range."""
    within = st.integers(low, high)
    if past:
        within = within | st.integers(high + 1, high + past) | st.integers(max(low - past, 0), low)
    return within.map(lambda value: str(value).zfill(width))


digit = st.sampled_from("0123456789") | st.sampled_from("٣۷x ")  # other scripts' digits, and not digits
heads = st.builds(
    lambda year, month, day, t, hour, minute: f"{year}-{month}-{day}{t}{hour}:{minute}",
    number(1, 9999, 4),
    number(1, 12, 2, past=1),
    number(1, 28, 2, past=4),
    st.sampled_from("Tt") | st.just(" "),
    number(0, 23, 2, past=1),
    number(0, 59, 2, past=1),
)
zones = st.sampled_from(["Z", "z", "+00:00", "-00:00", "+05:30", "-12:00", "+23:59"]) | st.sampled_from(
    ["+24:00", "+01:60", "01:00", ""]
)
seconds = number(0, 59, 2, past=2) | st.text(digit, min_size=0, max_size=3)
fractions = st.just("") | st.text(digit, min_size=0, max_size=12).map(lambda digits: "." + digits) | st.just(",5")


@given(st.lists(heads, min_size=1, max_size=3), st.data())
def test_every_value_reads_as_the_rule_reads_it(minutes: list[str], data: st.DataObject) -> None:
    for _ in range(20):
        value = data.draw(st.sampled_from(minutes)) + ":" + data.draw(seconds) + data.draw(fractions) + data.draw(zones)
        expected = reference(value)
        assert bits(read(value)) == bits(expected), value
        assert bits(read(value)) == bits(expected), value  # again: the value read last


@pytest.fixture(scope="module")
def compiled_reading() -> Callable[[str], float | None]:
    if compiled.NATIVE is None:
        pytest.fail(f"the compiled recogniser is not built, or {PURE_SETTING}=1 is set: run `make install`")
    reading: Callable[[str], float | None] = compiled.NATIVE.epoch_seconds_of
    return reading


@given(st.lists(heads, min_size=1, max_size=3), st.data())
def test_the_compiled_reading_is_the_rules_where_it_reads(
    compiled_reading: Callable[[str], float | None], minutes: list[str], data: st.DataObject
) -> None:
    for _ in range(20):
        value = data.draw(st.sampled_from(minutes)) + ":" + data.draw(seconds) + data.draw(fractions) + data.draw(zones)
        moment = compiled_reading(value)
        if moment is not None:
            assert bits(moment) == bits(reference(value)), value


NOT_ZONES = ("+24:00", "-24:00", "+23:60", "+1:00", "+01:00:00", "UTC")


@st.composite
def near_common(draw: st.DrawFn) -> tuple[str, bool]:
    """(a value at or just past the bounds of the forms the compiled reading reads, whether it
    is one of those forms and valid: then it must be read)."""
    year, month, day = draw(st.integers(1684, 2256)), draw(st.integers(0, 13)), draw(st.integers(0, 32))
    hour, minute, second = draw(st.integers(0, 24)), draw(st.integers(0, 60)), draw(st.integers(0, 61))
    fraction = draw(st.text(st.sampled_from("0123456789"), max_size=8) | st.sampled_from(["٣", "12x"]))
    offsets = st.builds(
        lambda sign, hours, minutes: f"{sign}{hours:02d}:{minutes:02d}",
        st.sampled_from("+-"),
        st.integers(0, 23),
        st.integers(0, 59),
    )
    zone = draw(st.sampled_from(["Z", "z"]) | offsets | st.sampled_from(NOT_ZONES))
    t = draw(st.sampled_from("Tt"))
    value = f"{year:04d}-{month:02d}-{day:02d}{t}{hour:02d}:{minute:02d}:{second:02d}"
    value += f".{fraction}" if fraction else ""
    value += zone
    common = (
        1686 <= year <= 2254
        and second < 60  # a leap second is the rule's to read
        and len(fraction) <= 6
        and fraction.isascii()
        and fraction.isdigit() | (fraction == "")
        and zone not in NOT_ZONES
    )
    return value, common


@settings(max_examples=1000)
@given(st.lists(near_common(), min_size=20, max_size=20))
def test_the_compiled_reading_of_the_common_forms_is_the_rules(
    compiled_reading: Callable[[str], float | None], values: list[tuple[str, bool]]
) -> None:
    for value, common in values:
        expected = reference(value)
        moment = compiled_reading(value)
        if moment is not None or (common and expected is not None):
            assert bits(moment) == bits(expected), value


@given(st.text(max_size=40))
def test_any_text_reads_as_the_rule_reads_it(value: str) -> None:
    assert bits(read(value)) == bits(reference(value))


def test_a_value_read_after_a_valid_one_is_checked() -> None:
    assert epoch_seconds("2026-11-30T12:00:59.9999999Z") == 1796040059.999999
    for refused in ("2026-11-30T12:00:61Z", "2026-11-30T12:00:5xZ", "2026-11-30T12:00:00.Z", "2026-11-30T12:00:00,5Z"):
        assert epoch_seconds("2026-11-30T12:00:00Z") == 1796040000.0
        with pytest.raises(ValueError, match="RFC 3339"):
            epoch_seconds(refused)


def test_the_validator_keeps_the_value_as_written() -> None:
    assert rfc3339("2026-11-30t12:00:00.5z") == "2026-11-30t12:00:00.5z"


@pytest.mark.parametrize(
    ("leap", "next_second"),
    [
        ("2016-12-31T23:59:60Z", "2017-01-01T00:00:00Z"),
        ("2016-12-31t23:59:60.5z", "2017-01-01T00:00:00.5Z"),
        ("2017-01-01T00:59:60+01:00", "2017-01-01T01:00:00+01:00"),
        ("2015-06-30T23:59:60.999999-00:00", "2015-07-01T00:00:00.999999Z"),
    ],
)
def test_a_leap_second_is_read_as_the_second_after_it(leap: str, next_second: str) -> None:
    """RFC 3339 allows second 60; POSIX time has no such second and counts it as the next."""
    assert bits(read(leap)) == bits(read(next_second))
    assert bits(epoch_seconds(leap)) == bits(epoch_seconds(next_second))  # the kept value is its own


def test_a_leap_second_past_the_last_day_is_refused() -> None:
    assert read("9999-12-31T23:59:60Z") is None
    assert read("9999-12-31T23:59:59Z") is not None


def test_a_refused_timestamp_is_a_dead_letter_reason() -> None:
    line = b'{"schema_version":1,"type":"run.closed","event_id":"e","run_id":"r","occurred_at":"2026-11-30T12:00:61Z"}'
    decode(line.replace(b":61Z", b":59Z"))
    with pytest.raises(DecodeError) as refused:
        decode(line)
    assert refused.value.code == "invalid-field"
    assert "occurred_at" in str(refused.value)
    assert PROBLEM in str(refused.value)
