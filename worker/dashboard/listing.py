"""Which runs the runs page shows: a query from the URL (labels, a run id prefix, a page) and
the page of rows it selects, newest first.

Every part of the view is in the URL (`label=model=m1&label=benchmark=b&q=nightly-&page=2`), so
a filtered view can be shared. Labels combine (a run holds all of them); `q` keeps the runs
whose id starts with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from urllib.parse import urlencode

from projections.analysis.history import matches
from worker.dashboard.views import RunRow

PER_PAGE = 50
MOST_PER_PAGE = 500


class BadQuery(ValueError):
    """A query parameter that says nothing we can show (its message says which and why)."""


def label_pairs(values: Iterable[str]) -> dict[str, str]:
    """`label=NAME=VALUE` parameters as a mapping; empty ones are left out (an empty form field)."""
    found: dict[str, str] = {}
    for value in values:
        if not value:
            continue
        name, sign, wanted = value.partition("=")
        if not sign or not name:
            raise BadQuery(f"label={value!r} is not NAME=VALUE; write e.g. label=model=m1")
        found[name] = wanted
    return found


def _number(query: Mapping[str, str], name: str, default: int, most: int) -> int:
    text = query.get(name) or str(default)
    if not text.isdigit() or not 1 <= int(text) <= most:
        raise BadQuery(f"{name}={text!r} is not a whole number from 1 to {most:,}")
    return int(text)


@dataclass(frozen=True, slots=True)
class RunsQuery:
    labels: dict[str, str] = field(default_factory=dict)
    prefix: str = ""
    page: int = 1
    per: int = PER_PAGE

    @classmethod
    def parse(cls, query: Mapping[str, str], labels: Iterable[str]) -> RunsQuery:
        """From the URL's parameters (`labels`: every `label=` value); `BadQuery` if one is wrong."""
        return cls(
            labels=label_pairs(labels),
            prefix=query.get("q", ""),
            page=_number(query, "page", 1, 10**9),
            per=_number(query, "per", PER_PAGE, MOST_PER_PAGE),
        )

    @property
    def filtered(self) -> bool:
        return bool(self.labels or self.prefix)

    def matches(self, row: RunRow) -> bool:
        return row.run_id.startswith(self.prefix) and matches(row.labels, self.labels)

    def href(self, *, page: int = 1, labels: Mapping[str, str] | None = None) -> str:
        """This view's URL, on another page or with other labels."""
        chosen = self.labels if labels is None else labels
        params = [("label", f"{name}={value}") for name, value in chosen.items()]
        params += [("q", self.prefix)] if self.prefix else []
        params += [("page", str(page))] if page != 1 else []
        params += [("per", str(self.per))] if self.per != PER_PAGE else []
        return f"/?{urlencode(params)}" if params else "/"


@dataclass(frozen=True, slots=True)
class RunsListing:
    query: RunsQuery
    rows: tuple[RunRow, ...]
    """This page's rows, in runs-page order."""
    total: int
    """Runs matching the query, on every page."""

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.query.per))

    @property
    def first(self) -> int:
        """The 1-based place of the page's first row among the matching runs."""
        return (self.query.page - 1) * self.query.per + 1


def listing(rows: Iterable[RunRow], query: RunsQuery, total: int) -> RunsListing:
    """The query's page of `rows` (every run, in runs-page order; `total` of them)."""
    start = (query.page - 1) * query.per
    if not query.filtered:  # the page only: the rest need not be looked at
        return RunsListing(query, tuple(islice(rows, start, start + query.per)), total)
    matching = [row for row in rows if query.matches(row)]
    return RunsListing(query, tuple(matching[start : start + query.per]), len(matching))
