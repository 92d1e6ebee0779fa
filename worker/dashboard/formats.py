"""Numbers and times as the pages print them (the exact figure stays in a data attribute)."""

from __future__ import annotations

import math


def figure(value: float | None) -> str:
    """A pass@k or rate figure, three decimals; a dash when there is none."""
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.3f}"


def duration(seconds: float | None) -> str:
    """`42 s`, `3 m 10 s`, `1 h 02 m`; a dash when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} m {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} m"


def ago(seconds: float) -> str:
    """How long ago, coarse: `just now`, `12 s ago`, `4 m ago`, `2 h ago`, `3 d ago`.
    The pages' script keeps the same words ticking (static/dashboard.js `ago`)."""
    whole = max(0, int(seconds))
    if whole < 2:
        return "just now"
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if whole >= size:
            return f"{whole // size} {unit} ago"
    return f"{whole} s ago"


def count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"
