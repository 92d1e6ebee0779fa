"""HTML that cannot carry untrusted text unescaped.

Run ids, task ids, trial ids, labels and error types are anyone's text. Every page is built
from `html(template, *values)`: each value is escaped (text and attribute alike, quotes
included) unless it is already `Html`, which only this module's functions make. So a value
that reaches a page without passing through `html` is a type error, not an injection.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from urllib.parse import urlencode


class Html(str):
    """Markup already safe to send: built by `html` or `join` here, never from input."""

    __slots__ = ()


def text(value: object) -> Html:
    """`value` as text that renders as itself, in an element or a quoted attribute."""
    if isinstance(value, Html):
        return value
    return Html(escape(str(value), quote=True))


def html(template: str, *values: object) -> Html:
    """`template` (a literal of ours) with each `{}` filled by `text(value)`."""
    return Html(template.format(*(text(value) for value in values)))


def join(parts: Iterable[Html], separator: str = "") -> Html:
    return Html(separator.join(text(part) for part in parts))


def href(path: str, **query: str) -> str:
    """A link to one of our routes: the values percent-encoded (a run id may hold `/`, `?`,
    `#` or `&`). Still text: `html` escapes it into the attribute."""
    return f"{path}?{urlencode(query)}" if query else path
