"""pass@k (or pass^k) against k as inline SVG: no script, no library, nothing fetched.

The y axis is always 0..1 (both are probabilities), so that two charts read alike; the x axis
runs over k = 1..the largest k any series has. Each point carries its exact figures as a
tooltip (`<title>`), and the legend names the series as text. A point with a 95% interval
gets an error bar from its low to its high end (capped), drawn under the line, the interval's
ends in `data-low` and `data-high` as the record says them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.dashboard.markup import Html, html, join

WIDTH, HEIGHT = 520, 230
LEFT, RIGHT, TOP, BOTTOM = 44, 16, 12, 34
LEGEND_LINE = 18
COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000")
"""Okabe and Ito's palette, readable with the common colour-vision deficiencies."""


@dataclass(frozen=True, slots=True)
class Point:
    k: int
    value: float
    detail: str
    """The tooltip: the figure's own numbers."""
    low: float | None = None
    high: float | None = None
    """The 95% interval (None: none, below two tasks)."""


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    points: tuple[Point, ...]


def passk_chart(series: Sequence[Series], caption: str, figure: str = "pass@") -> Html:
    """One line per series; an empty chart says there is nothing to draw yet. `figure` names
    a point in its tooltip (`pass@` or `pass^`, then k)."""
    ks = [point.k for line in series for point in line.points]
    legend_height = LEGEND_LINE * len(series)
    height = HEIGHT + legend_height
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top_k = max(ks, default=1)

    def x(k: int) -> float:
        return LEFT + (plot_width / 2 if top_k == 1 else (k - 1) * plot_width / (top_k - 1))

    def y(value: float) -> float:
        return TOP + (1.0 - min(1.0, max(0.0, value))) * plot_height

    grid = join(
        html(
            '<line x1="{}" x2="{}" y1="{}" y2="{}" class="grid"/><text x="{}" y="{}" class="tick" '
            'text-anchor="end">{}</text>',
            LEFT,
            WIDTH - RIGHT,
            f"{y(level):.1f}",
            f"{y(level):.1f}",
            LEFT - 6,
            f"{y(level) + 4:.1f}",
            f"{level:g}",
        )
        for level in (0.0, 0.25, 0.5, 0.75, 1.0)
    )
    step = max(1, top_k // 12)
    ticks = join(
        html(
            '<text x="{}" y="{}" class="tick" text-anchor="middle">{}</text>', f"{x(k):.1f}", TOP + plot_height + 16, k
        )
        for k in range(1, top_k + 1)
        if (k - 1) % step == 0 or k == top_k
    )
    colours = [COLOURS[index % len(COLOURS)] for index in range(len(series))]
    bars = join(_bars(line, colour, x, y) for line, colour in zip(series, colours, strict=True))
    lines = join(_line(line, colour, x, y, figure) for line, colour in zip(series, colours, strict=True))
    legend = join(
        html(
            '<rect x="{}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}" class="legend">{}</text>',
            LEFT,
            HEIGHT + index * LEGEND_LINE,
            COLOURS[index % len(COLOURS)],
            LEFT + 18,
            HEIGHT + index * LEGEND_LINE + 10,
            line.label,
        )
        for index, line in enumerate(series)
    )
    empty = html("") if ks else html('<text x="{}" y="{}" class="empty">no figures yet</text>', LEFT + 10, TOP + 40)
    return html(
        '<svg class="chart" viewBox="0 0 {} {}" width="{}" height="{}" role="img" aria-label="{}">'
        '<title>{}</title>{}{}{}{}{}<text x="{}" y="{}" class="axis" text-anchor="middle">k</text>{}</svg>',
        WIDTH,
        height,
        WIDTH,
        height,
        caption,
        caption,
        grid,
        ticks,
        bars,
        lines,
        empty,
        LEFT + plot_width / 2,
        TOP + plot_height + 30,
        legend,
    )


def _line(line: Series, colour: str, x: Callable[[int], float], y: Callable[[float], float], figure: str) -> Html:
    path = " ".join(f"{x(point.k):.1f},{y(point.value):.1f}" for point in line.points)
    dots = join(
        html(
            '<circle cx="{}" cy="{}" r="3.5" fill="{}"><title>{}</title></circle>',
            f"{x(point.k):.1f}",
            f"{y(point.value):.1f}",
            colour,
            f"{line.label} {figure}{point.k} = {point.detail}",
        )
        for point in line.points
    )
    return html('<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>{}', path, colour, dots)


CAP = 4
"""Half the width of an error bar's caps, in pixels."""


def _bars(line: Series, colour: str, x: Callable[[int], float], y: Callable[[float], float]) -> Html:
    return join(
        html(
            '<g class="interval" data-series="{}" data-k="{}" data-low="{}" data-high="{}" stroke="{}">'
            '<line x1="{}" x2="{}" y1="{}" y2="{}"/><line x1="{}" x2="{}" y1="{}" y2="{}"/>'
            '<line x1="{}" x2="{}" y1="{}" y2="{}"/></g>',
            line.label,
            point.k,
            repr(point.low),
            repr(point.high),
            colour,
            *(f"{x(point.k):.1f}", f"{x(point.k):.1f}", f"{y(point.low):.1f}", f"{y(point.high):.1f}"),
            *(f"{x(point.k) - CAP:.1f}", f"{x(point.k) + CAP:.1f}", f"{y(point.low):.1f}", f"{y(point.low):.1f}"),
            *(f"{x(point.k) - CAP:.1f}", f"{x(point.k) + CAP:.1f}", f"{y(point.high):.1f}", f"{y(point.high):.1f}"),
        )
        for point in line.points
        if point.low is not None and point.high is not None
    )
