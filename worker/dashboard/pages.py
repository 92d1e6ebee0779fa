"""The runs page and a run's page, as HTML built from the view models (`views`).

Each page is a layout around sections that each have an element id; the live stream sends a
section again (a `Fragment`) when what it shows changed, and the page's script swaps it in.
The full page is built from the same section functions, so a page opened mid-run and a page
kept open show the same thing. Element ids are digests of run ids, never the ids themselves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from worker.dashboard.charts import Point, Series, passk_chart
from worker.dashboard.follow import Follower
from worker.dashboard.formats import ago, count, duration, figure
from worker.dashboard.listing import PER_PAGE, RunsListing, RunsQuery
from worker.dashboard.markup import Html, href, html, join
from worker.dashboard.views import VERDICTS, Cell, KeyFigures, KeyTasks, RunRow, RunView, sort_key

SHOWN_TASKS = 200
"""Rows of flaky and failed tasks a page lists per key; the JSON API lists every one."""


@dataclass(frozen=True, slots=True)
class Fragment:
    """A section of a page to put in place: the element with `id` is replaced by `html`; if
    there is none, it is added to the element `parent` (kept sorted by `data-sort`)."""

    id: str
    html: Html
    parent: str | None = None


def dom_id(prefix: str, run_id: str) -> str:
    return f"{prefix}-{hashlib.blake2s(run_id.encode(), digest_size=8).hexdigest()}"


def layout(title: str, body: Html, *, version: int, footer: Html) -> Html:
    """A whole page: our stylesheet and script only (the Content-Security-Policy allows no other).
    `footer` is the whole `<footer id="topics">` element (`server.footer`)."""
    return html(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>{} · evalstream</title>"
        '<link rel="icon" href="/static/favicon.svg"><link rel="stylesheet" href="/static/dashboard.css">'
        '<script src="/static/dashboard.js" defer></script>'
        '</head><body data-version="{}"><header><a href="/" class="home">evalstream</a>'
        '<span id="live" class="live">connecting…</span></header><main>{}</main>{}</body></html>',
        title,
        version,
        body,
        footer,
    )


def moved(at: float | None, now: float) -> Html:
    """When something last moved; the script keeps it ticking."""
    if at is None:
        return html("–")
    return html('<time data-at="{}">{}</time>', round(at * 1000), ago(now - at))


def labels(values: dict[str, str]) -> Html:
    return join(html('<span class="label">{}={}</span>', name, value) for name, value in values.items())


def status(row: RunRow) -> Html:
    said = row.status if row.closed_reason is None else f"closed: {row.closed_reason}"
    return html('<span class="status {}">{}</span>', row.status, said)


def bar(row: RunRow) -> Html:
    if row.percent_done is None:
        return html('<progress aria-label="{}"></progress>', "trials done: unknown")
    return html(
        '<progress max="100" value="{}" aria-label="{}"></progress> <span class="num">{}%</span>',
        row.percent_done,
        f"{row.percent_done:g}% of trials done",
        f"{row.percent_done:.0f}",
    )


def trials(row: RunRow) -> str:
    if row.trials_expected is None:
        return count(row.trials_done)
    return f"{count(row.trials_done)} / {count(row.trials_expected)}"


def eta(row: RunRow) -> str:
    return "done" if row.status == "closed" else duration(row.eta_seconds)


def footer(followers: list[Follower]) -> Html:
    """How each topic is read: the page's `<footer id=\"topics\">`."""
    said = {
        "waiting": "waiting for the topic (the worker creates it when it starts)",
        "reading": "reading",
        "live": "live",
    }
    topics = join(
        html(
            '<span class="topic">{} at {}: {}, {} records{}</span>',
            follower.topic,
            follower.settings.bootstrap,
            said[follower.state],
            f"{follower.records:,}",
            f", {follower.invalid} invalid skipped" if follower.invalid else "",
        )
        for follower in followers
    )
    return html('<footer id="topics">{}</footer>', topics)


# The runs page.

NO_RUNS = html(
    '<p class="empty" id="no-runs">No run yet. Start one: <code>evalstream simulate --run-id demo</code></p>'
)


def runs_page(shown: RunsListing, *, now: float, version: int, footer: Html) -> Html:
    query = shown.query
    body = html(
        "<h1>Runs</h1>{}"
        # A grid, not a table: a row swapped in is laid out alone, and rows off screen not at all.
        '<div class="runs" role="table" aria-label="runs"><div class="row head" role="row">'
        '<span role="columnheader">run</span><span role="columnheader">status</span>'
        '<span role="columnheader">progress</span><span role="columnheader" class="num">trials</span>'
        '<span role="columnheader" class="num" title="trials that died">dead</span>'
        '<span role="columnheader" class="num">ETA</span><span role="columnheader">pass@1</span>'
        '<span role="columnheader">labels</span><span role="columnheader">moved</span></div>'
        "{}</div>{}{}"
        '<h2>Compare two runs</h2><form action="/compare" method="get" class="compare">'
        '<label>baseline <input name="baseline" list="summarized" required></label> '
        '<label>candidate <input name="candidate" list="summarized" required></label> '
        '<button type="submit">compare</button></form>{}',
        runs_filter(query),
        runs_group(shown, now),
        pager(shown),
        html("") if shown.rows or query.filtered else NO_RUNS,
        compare_options(shown),
    )
    return layout("runs", body, version=version, footer=footer)


def runs_filter(query: RunsQuery) -> Html:
    """The filter form (a GET of this page: the view is its URL) and the labels in force, each
    a link to the view without it."""
    fields = join(
        html('<input name="label" value="{}" aria-label="label" size="18">', f"{name}={value}")
        for name, value in query.labels.items()
    )
    chips = join(
        html(
            '<a class="label chosen" href="{}" title="show runs without this filter">{}={} ×</a>',
            query.href(labels={other: v for other, v in query.labels.items() if other != name}),
            name,
            value,
        )
        for name, value in query.labels.items()
    )
    return html(
        '<form class="filter" action="/" method="get" id="filter">'
        '<label>run id starts with <input name="q" value="{}" size="18"></label> '
        "<label>labels {}"
        '<input name="label" value="" placeholder="model=m1" aria-label="another label" size="18"></label> '
        '{}<button type="submit">filter</button> <span class="chosen-labels">{}</span></form>',
        query.prefix,
        fields,
        html('<input type="hidden" name="per" value="{}">', query.per) if query.per != PER_PAGE else html(""),
        chips,
    )


def runs_group(shown: RunsListing, now: float) -> Html:
    return html(
        '<div id="runs" role="rowgroup" data-total="{}">{}</div>',
        shown.total,
        join(run_row(row, now, shown.query) for row in shown.rows),
    )


def pager(shown: RunsListing) -> Html:
    query, last = shown.query, shown.first + len(shown.rows) - 1
    newer = html('<a rel="prev" href="{}">newer</a>', query.href(page=query.page - 1)) if query.page > 1 else html("")
    older = (
        html('<a rel="next" href="{}">older</a>', query.href(page=query.page + 1))
        if query.page < shown.pages
        else html("")
    )
    said = f"runs {shown.first:,}–{last:,} of {shown.total:,}" if shown.rows else f"no run of {shown.total:,} here"
    return html(
        '<nav id="pager" class="pager" data-page="{}" data-pages="{}"><span class="shown">{}{}</span> {} {}</nav>',
        query.page,
        shown.pages,
        said,
        " matching" if query.filtered else "",
        newer,
        older,
    )


def run_row(row: RunRow, now: float, query: RunsQuery) -> Html:
    pass_at_1 = join(
        html('<span class="figure" data-key="{}" data-value="{}">{} {}</span>', key, repr(mean), key, figure(mean))
        for key, mean in row.pass_at_1.items()
    )
    return html(
        '<div class="row" role="row" id="{}" data-sort="{}" data-seq="{}" data-revision="{}">'
        '<span role="cell"><a href="{}" class="run-id">{}</a></span><span role="cell">{}</span>'
        '<span role="cell">{}</span><span role="cell" class="num">{}</span><span role="cell" class="num">{}</span>'
        '<span role="cell" class="num">{}</span><span role="cell">{}</span><span role="cell">{}</span>'
        '<span role="cell">{}</span></div>',
        dom_id("run", row.run_id),
        sort_key(row),
        row.seq or "",
        row.revision or "",
        href("/run", id=row.run_id),
        row.run_id,
        status(row),
        bar(row),
        trials(row),
        count(row.dead_trials),
        eta(row),
        pass_at_1,
        label_links(row.labels, query),
        moved(row.moved_at, now),
    )


def label_links(values: dict[str, str], query: RunsQuery) -> Html:
    """A row's labels, each a link to the runs page filtered by it too."""
    return join(
        html(
            '<a class="label" href="{}" title="only runs with this label">{}={}</a>',
            query.href(labels={**query.labels, name: value}),
            name,
            value,
        )
        for name, value in values.items()
    )


def compare_options(shown: RunsListing) -> Html:
    """The compare form's choices: the runs of this page that have a summary."""
    return html(
        '<datalist id="summarized">{}</datalist>',
        join(compare_option(row.run_id) for row in shown.rows if row.revision is not None),
    )


def compare_option(run_id: str) -> Html:
    return html('<option id="{}" value="{}"></option>', dom_id("option", run_id), run_id)


def runs_fragments(row: RunRow | None, run_id: str, now: float, query: RunsQuery) -> list[Fragment]:
    """A run's row again, in place (none: the run is gone), and its option in the compare form."""
    fragments = [Fragment(dom_id("run", run_id), run_row(row, now, query) if row else html(""), "runs")]
    if row is not None and row.revision is not None:
        fragments.append(Fragment(dom_id("option", run_id), compare_option(run_id), "summarized"))
    return fragments


def runs_page_fragments(shown: RunsListing, now: float) -> list[Fragment]:
    """The whole list again: the page's rows are other runs than it showed."""
    return [
        Fragment("runs", runs_group(shown, now)),
        Fragment("pager", pager(shown)),
        Fragment("summarized", compare_options(shown)),
        Fragment("no-runs", html("")),
    ]


# A run's page.


def run_page(view: RunView, *, now: float, version: int, footer: Html) -> Html:
    """A run's page; for a run nothing has come of (`figures_from` "nothing": no such run, or
    not started), a page that says so, whose sections the run's first record fills in."""
    body = html(
        '<h1>Run <span class="run-id">{}</span></h1>{}{}{}',
        view.row.run_id,
        run_head(view, now),
        run_figures(view),
        run_details(view),
    )
    title = f"run {view.row.run_id}" + (": not found" if view.figures_from == "nothing" else "")
    return layout(title, body, version=version, footer=footer)


def run_head(view: RunView, now: float) -> Html:
    row = view.row
    if view.figures_from == "nothing":
        return html(
            '<section id="run-head" data-seq="" data-revision=""><p class="not-found">Run not found: no progress '
            "or summary of run {} has reached this dashboard. Check the run id (the runs page lists every run); "
            "if the run has not started yet, this page fills in when it does.</p></section>",
            row.run_id,
        )
    facts = [
        ("status", status(row)),
        ("progress", bar(row)),
        ("trials", html("{}", trials(row))),
        ("dead trials", html("{}", count(row.dead_trials))),
        ("ETA", html("{}", eta(row))),
        ("tasks", html("{} declared, {} with attempts", count(view.tasks_declared), count(view.tasks_with_attempts))),
        ("pending tasks", html("{}", count(view.tasks_pending))),
        ("scores applied", html("{}", count(view.scores_applied))),
        ("events applied", html("{}", count(view.event_count))),
        ("summary revision", html("{}", row.revision or "none yet (the run is open)")),
        ("labels", labels(row.labels) or html("{}", "–" if row.revision else "with the summary")),
        ("last moved", moved(row.moved_at, now)),
    ]
    return html(
        '<section id="run-head" data-seq="{}" data-revision="{}"><dl class="facts">{}</dl></section>',
        row.seq or "",
        row.revision or "",
        join(html('<div><dt>{}</dt><dd data-fact="{}">{}</dd></div>', name, name, value) for name, value in facts),
    )


def run_figures(view: RunView) -> Html:
    if view.figures_from == "nothing":
        return html('<section id="run-figures" data-from="nothing"></section>')
    source = (
        f"from summary revision {view.row.revision}"
        if view.figures_from == "summary"
        else f"live, from progress event {view.row.seq}"
    )
    return html(
        '<section id="run-figures" data-from="{}"><h2>pass@k and pass^k <small>{}</small></h2>'
        '<p class="legend">Bars: the 95% interval (Student\'s t, clustered by task), none below two tasks. '
        "pass^k: the chance that k attempts of a task all pass.</p>"
        '<div class="charts"><figure class="passk"><figcaption>pass@k</figcaption>{}</figure>'
        '<figure class="passhatk"><figcaption>pass^k</figcaption>{}</figure></div>'
        "{}<h2>verdicts</h2>{}</section>",
        view.figures_from,
        source,
        passk_chart([key_series(key) for key in view.keys], "pass@k against k, per key, with 95% intervals"),
        passk_chart(
            [hat_series(key) for key in view.keys], "pass^k against k, per key, with 95% intervals", figure="pass^"
        ),
        passk_table(view.keys),
        verdict_table(view.keys),
    )


def key_series(key: KeyFigures) -> Series:
    """pass@k of one key, each point with its interval from the same record's statistics."""
    points = []
    for figure_ in key.pass_at:
        if figure_.mean is None:
            continue
        interval = key.interval_at(figure_.k)
        low, high = (interval.low, interval.high) if interval is not None else (None, None)
        detail = f"{figure_.mean:.4f} over {figure_.count} tasks, {figure_.nan_count} NaN{_within(low, high)}"
        points.append(Point(figure_.k, figure_.mean, detail, low, high))
    return Series(key.key, tuple(points))


def hat_series(key: KeyFigures) -> Series:
    return Series(
        key.key,
        tuple(
            Point(
                hat.k, hat.mean, f"{hat.mean:.4f} over {hat.count} tasks{_within(hat.low, hat.high)}", hat.low, hat.high
            )
            for hat in key.pass_hat
            if hat.mean is not None
        ),
    )


def _within(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return ", no interval (fewer than two tasks)"
    return f", 95% interval [{low:.4f}, {high:.4f}]"


def shown_ks(top: int) -> list[int]:
    """The k columns of a table: all up to 10, else 1..5, the tens, and the last."""
    if top <= 10:
        return list(range(1, top + 1))
    return sorted({*range(1, 6), *range(10, top + 1, 10), top})


def passk_table(keys: Sequence[KeyFigures]) -> Html:
    ks = shown_ks(max((figure_.k for key in keys for figure_ in key.pass_at), default=0))
    head = join(html("<th>pass@{}</th>", k) for k in ks)
    rows = join(
        html("<tr><th>{}</th>{}</tr>", key.key, join(_figure_cell(key, k) for k in ks)) for key in keys if key.pass_at
    )
    return html(
        '<table class="figures passk"><thead><tr><th>key</th>{}</tr></thead><tbody>{}</tbody></table>', head, rows
    )


def _figure_cell(key: KeyFigures, k: int) -> Html:
    found = next((figure_ for figure_ in key.pass_at if figure_.k == k), None)
    if found is None:
        return html('<td class="num">–</td>')
    interval = key.interval_at(k)
    within = _within(interval.low, interval.high) if interval is not None else ""
    return html(
        '<td class="num" data-key="{}" data-k="{}" data-value="{}" title="{}">{}</td>',
        key.key,
        k,
        repr(found.mean),
        f"over {found.count} tasks, {found.nan_count} NaN (unmeasured){within}",
        figure(found.mean),
    )


def verdict_table(keys: Sequence[KeyFigures]) -> Html:
    head = join(html("<th>{}</th>", verdict) for verdict in VERDICTS)
    rows = join(
        html(
            "<tr><th>{}</th>{}</tr>",
            key.key,
            join(
                html('<td class="num" data-key="{}" data-verdict="{}">{}</td>', key.key, verdict, key.verdicts[verdict])
                for verdict in VERDICTS
            ),
        )
        for key in keys
    )
    return html(
        '<table class="figures verdicts"><thead><tr><th>key</th>{}</tr></thead><tbody>{}</tbody></table>', head, rows
    )


def run_details(view: RunView) -> Html:
    if view.figures_from == "nothing":
        return html('<section id="run-details"></section>')
    if view.row.revision is None:
        return html(
            '<section id="run-details"><p class="empty">The flaky and failed tasks, their attempts and the error '
            "types appear with the run's summary, when it closes.</p></section>"
        )
    errors = join(
        html('<tr><td class="error-type">{}</td><td class="num">{}</td></tr>', kind, trials_)
        for kind, trials_ in sorted(view.errors.items(), key=lambda item: (-item[1], item[0]))
    )
    return html(
        '<section id="run-details"><h2>flaky and failed tasks</h2>'
        '<p class="legend"><span class="cell passed"></span> passed <span class="cell failed"></span> failed '
        '<span class="cell dead"></span> dead (the trial died); in trial order, the trial id on hover</p>{}'
        "<h2>errors</h2>{}</section>",
        join(key_tasks(key) for key in view.problem_tasks),
        html(
            '<table class="errors"><thead><tr><th>error type</th><th>trials</th></tr></thead><tbody>{}</tbody></table>',
            errors,
        )
        if view.errors
        else html('<p class="empty">No trial died.</p>'),
    )


def key_tasks(key: KeyTasks) -> Html:
    if not key.tasks:
        return html('<h3>{}</h3><p class="empty">No flaky or failed task.</p>', key.key)
    rows = join(
        html(
            '<tr><td class="task-id">{}</td><td class="verdict {}">{}</td><td class="cells">{}</td></tr>',
            task.task_id,
            task.verdict,
            task.verdict,
            join(
                html('<span class="cell {}" title="{}"></span>', cell.outcome, _cell_title(cell)) for cell in task.cells
            ),
        )
        for task in key.tasks[:SHOWN_TASKS]
    )
    more = len(key.tasks) - SHOWN_TASKS
    return html(
        '<h3>{}</h3><table class="attempts" data-key="{}"><tbody>{}</tbody></table>{}',
        key.key,
        key.key,
        rows,
        html('<p class="more">and {} more (the JSON API lists every one)</p>', more) if more > 0 else html(""),
    )


def _cell_title(cell: Cell) -> str:
    return f"{cell.trial_id}: dead" if cell.value is None else f"{cell.trial_id}: {cell.outcome} ({cell.value:g})"


def run_fragments(before: RunView | None, view: RunView, now: float) -> list[Fragment]:
    """The sections of a run's page that changed since `before` was sent."""
    fragments = [Fragment("run-head", run_head(view, now))]
    summary_changed = before is None or before.row.revision != view.row.revision
    if summary_changed or view.figures_from == "progress":
        fragments.append(Fragment("run-figures", run_figures(view)))
    if summary_changed:
        fragments.append(Fragment("run-details", run_details(view)))
    return fragments
