"""Non-finite numbers on the wire: JSON has no literal for them, so EVENTS.md spells them
as the strings "NaN", "Infinity" and "-Infinity", in input and output alike."""

import math

NONFINITE_STRINGS: dict[str, float] = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def wire_float(value: float) -> float | str:
    """The JSON-ready form of a float: itself when finite, else its EVENTS.md string."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def read_float(value: float | str | None) -> float | None:
    """A wire number (a float, or one of the non-finite strings) as a float; None stays None."""
    return NONFINITE_STRINGS[value] if isinstance(value, str) else value
