"""The task page: one task's verdict and pass rate in each run of a label set, oldest to newest,
and the tasks whose verdict changed between those runs (`projections.analysis.history`).

`/task?id=TASK&label=benchmark=b` shows both; without `id`, the changes alone. Every task id in
the list links to its own history under the same labels.
"""

from __future__ import annotations

from urllib.parse import urlencode

from projections.analysis.history import Flip, History, TaskRun
from worker.dashboard.formats import figure
from worker.dashboard.markup import Html, href, html, join
from worker.dashboard.pages import Fragment, layout

SHOWN_FLIPS = 200
"""Rows of the changed-tasks list a page shows; the JSON API lists every one."""
SHOWN_RUNS = 200
"""Runs of a task's history a page shows, the newest; the JSON API lists every one."""


def task_href(task_id: str | None, labels: dict[str, str]) -> str:
    params = ([("id", task_id)] if task_id is not None else []) + [
        ("label", f"{name}={value}") for name, value in labels.items()
    ]
    return f"/task?{urlencode(params)}"


def task_page(shown: History, *, version: int, footer: Html) -> Html:
    title = f"task {shown.task_id}" if shown.task_id is not None else "tasks across runs"
    body = html(
        "<h1>{}</h1>{}{}{}",
        html('Task <span class="task-id">{}</span>', shown.task_id)
        if shown.task_id is not None
        else "Tasks across runs",
        task_filter(shown),
        task_runs(shown),
        task_flips(shown),
    )
    return layout(title, body, version=version, footer=footer)


def task_filter(shown: History) -> Html:
    fields = join(
        html('<input name="label" value="{}" aria-label="label" size="18">', f"{name}={value}")
        for name, value in shown.labels.items()
    )
    return html(
        '<form class="filter" action="/task" method="get"><label>task <input name="id" value="{}" size="24">'
        "</label> <label>runs with labels {}"
        '<input name="label" value="" placeholder="benchmark=b" aria-label="another label" size="18"></label> '
        '<button type="submit">show</button></form>',
        shown.task_id or "",
        fields,
    )


def _labels_said(shown: History) -> Html:
    if not shown.labels:
        return html("every run")
    return join((html('<span class="label">{}={}</span>', name, value) for name, value in shown.labels.items()), " ")


def task_runs(shown: History) -> Html:
    if shown.task_id is None:
        return html('<section id="task-runs" hidden></section>')
    keys = sorted({key for run in shown.task for key in run.outcomes})
    head = join(html("<th>{}</th>", key) for key in keys)
    rows = join(_task_run(run, keys) for run in shown.task[-SHOWN_RUNS:])
    measured = sum(1 for run in shown.task if run.outcomes)
    older = len(shown.task) - SHOWN_RUNS
    return html(
        '<section id="task-runs" data-runs="{}"><h2>in each run, oldest first <small>{} of {} runs of {} have it'
        "</small></h2>{}"
        '<table class="history"><thead><tr><th>run</th>{}</tr></thead><tbody>{}</tbody></table></section>',
        len(shown.task),
        measured,
        len(shown.task),
        _labels_said(shown),
        html('<p class="more">the newest {}; the {} older: the JSON API lists every one</p>', SHOWN_RUNS, older)
        if older > 0
        else html(""),
        head,
        rows,
    )


def _task_run(run: TaskRun, keys: list[str]) -> Html:
    cells = []
    for key in keys:
        outcome = run.outcomes.get(key)
        if outcome is None:
            cells.append(html('<td class="num">–</td>'))
            continue
        cells.append(
            html(
                '<td data-key="{}" data-verdict="{}" data-rate="{}"><span class="verdict {}">{}</span> '
                '<span class="num" title="{}">{}</span></td>',
                key,
                outcome.verdict,
                "" if outcome.pass_rate is None else repr(outcome.pass_rate),
                outcome.verdict,
                outcome.verdict,
                f"{outcome.passed} of {outcome.attempts} attempts passed",
                figure(outcome.pass_rate),
            )
        )
    return html(
        '<tr data-run="{}"><td><a class="run-id" href="{}">{}</a></td>{}</tr>',
        run.run_id,
        href("/run", id=run.run_id),
        run.run_id,
        join(cells),
    )


def task_flips(shown: History) -> Html:
    if not shown.flips:
        body = html('<p class="empty">No task changed its verdict between these runs.</p>')
    else:
        rows = join(_flip(flip, shown.labels) for flip in shown.flips[:SHOWN_FLIPS])
        more = len(shown.flips) - SHOWN_FLIPS
        body = html(
            '<table class="flips"><thead><tr><th>task</th><th>key</th><th class="num">changes</th>'
            '<th class="num">runs measured</th><th>first changed in</th><th>verdict now</th></tr></thead>'
            "<tbody>{}</tbody></table>{}",
            rows,
            html('<p class="more">and {} more (the JSON API lists every one)</p>', more) if more > 0 else html(""),
        )
    return html(
        '<section id="task-flips" data-flips="{}"><h2>flaky across runs <small>tasks whose verdict changed between '
        "the {} runs of {}</small></h2>{}</section>",
        len(shown.flips),
        len(shown.runs),
        _labels_said(shown),
        body,
    )


def _flip(flip: Flip, labels: dict[str, str]) -> Html:
    return html(
        '<tr data-task="{}" data-key="{}"><td><a class="task-id" href="{}">{}</a></td><td>{}</td>'
        '<td class="num">{}</td><td class="num">{}</td><td><a class="run-id" href="{}">{}</a></td>'
        '<td><span class="verdict {}">{}</span></td></tr>',
        flip.task_id,
        flip.key,
        task_href(flip.task_id, labels),
        flip.task_id,
        flip.key,
        flip.changes,
        flip.measured,
        href("/run", id=flip.first_changed_in),
        flip.first_changed_in,
        flip.last_verdict,
        flip.last_verdict,
    )


def task_fragments(shown: History) -> list[Fragment]:
    return [Fragment("task-runs", task_runs(shown)), Fragment("task-flips", task_flips(shown))]
