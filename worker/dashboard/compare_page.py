"""Two runs side by side, as HTML: the head (each run's state) and the body (the comparison).

The body shows `projections.analysis.compare`'s record as it is: per pass@k key, pass@k of both runs
(as their summaries state them, each over its own tasks), the paired mean difference of the
per-task pass rates with its 95% interval (Student's t over the paired tasks), whether that
difference is resolved (the interval excludes 0) in words, and how many more paired tasks would
resolve a difference of the observed size at 80% power (`projections.analysis.gate.power`), the verdicts that
got worse (regressions) or better (fixes), and the tasks and keys only one of the runs has.
"""

from __future__ import annotations

from collections.abc import Sequence

from projections.analysis.compare import Comparison, KeyComparison, PassAt, VerdictChange
from projections.analysis.gate.power import power
from worker.dashboard.charts import Point, Series, passk_chart
from worker.dashboard.formats import figure
from worker.dashboard.markup import Html, href, html, join
from worker.dashboard.pages import SHOWN_TASKS, Fragment, bar, labels, layout, moved, status
from worker.dashboard.views import CompareView, RunRow


def compare_page(view: CompareView, *, now: float, version: int, footer: Html) -> Html:
    body = html(
        '<h1>Compare <span class="run-id">{}</span> with <span class="run-id">{}</span></h1>{}{}',
        view.candidate_id,
        view.baseline_id,
        compare_head(view, now),
        compare_body(view),
    )
    return layout(f"{view.candidate_id} vs {view.baseline_id}", body, version=version, footer=footer)


def compare_head(view: CompareView, now: float) -> Html:
    sides = join(
        _side(role, run_id, row, now)
        for role, run_id, row in (
            ("baseline", view.baseline_id, view.baseline),
            ("candidate", view.candidate_id, view.candidate),
        )
    )
    base, cand = view.benchmarks
    warning = (
        html('<p class="warning">Different benchmarks: {} and {}; the comparison may mean little.</p>', base, cand)
        if base is not None and cand is not None and base != cand
        else html("")
    )
    return html('<section id="compare-head"><div class="sides">{}</div>{}</section>', sides, warning)


def _side(role: str, run_id: str, row: RunRow | None, now: float) -> Html:
    if row is None:
        return html(
            '<div class="side"><h2>{}</h2><p><a class="run-id" href="{}">{}</a></p>'
            '<p class="empty">Nothing of this run has arrived yet.</p></div>',
            role,
            href("/run", id=run_id),
            run_id,
        )
    return html(
        '<div class="side" data-role="{}"><h2>{}</h2><p><a class="run-id" href="{}">{}</a> {}</p><p>{}</p>'
        "<p>summary revision {} · moved {}</p><p>{}</p></div>",
        role,
        role,
        href("/run", id=run_id),
        run_id,
        status(row),
        bar(row),
        row.revision or "– (not closed)",
        moved(row.moved_at, now),
        labels(row.labels),
    )


def compare_body(view: CompareView) -> Html:
    comparison = view.comparison
    if comparison is None:
        waiting = " and ".join(repr(run_id) for run_id in view.waiting_for)
        return html(
            '<section id="compare-body"><p class="empty">Waiting for the summary of {} (a run has one once it '
            "is closed); this page fills in then.</p></section>",
            waiting,
        )
    return html(
        '<section id="compare-body" data-baseline-revision="{}" data-candidate-revision="{}">'
        "<h2>per key</h2>{}{}{}{}</section>",
        comparison.baseline_revision,
        comparison.candidate_revision,
        key_table(comparison),
        join(key_section(key) for key in comparison.keys),
        _only(comparison),
        html('<p class="empty">The two runs share no pass@k key.</p>') if not comparison.keys else html(""),
    )


def key_table(comparison: Comparison) -> Html:
    rows = join(
        html(
            '<tr data-key="{}"><th>{}</th><td class="num">{}</td><td class="num">{} → {}</td><td class="num">{}</td>'
            '<td class="num">{}</td><td class="num regression">{}</td><td class="num fix">{}</td></tr>',
            key.key,
            key.key,
            len(key.tasks),
            _mean(key.baseline_pass_at, 1),
            _mean(key.candidate_pass_at, 1),
            "–" if key.mean_difference is None else f"{key.mean_difference:+.4f}",
            "–" if key.interval is None else f"[{key.interval[0]:+.4f}, {key.interval[1]:+.4f}]",
            len(key.regressions),
            len(key.fixes),
        )
        for key in comparison.keys
    )
    return html(
        '<table class="figures keys"><thead><tr><th>key</th><th title="tasks both runs measured">paired tasks</th>'
        "<th>pass@1 baseline → candidate</th><th>mean difference</th><th>95% interval</th><th>regressions</th>"
        "<th>fixes</th></tr></thead><tbody>{}</tbody></table>",
        rows,
    )


def resolution(key: KeyComparison) -> str:
    """Whether the paired difference is resolved (its interval excludes 0), and how many more
    paired tasks would resolve one of the observed size at 80% power, in words."""
    if key.interval is None or key.mean_difference is None:
        return (
            f"Not resolved: {len(key.tasks)} paired task{'' if len(key.tasks) == 1 else 's'}, too few for an interval."
        )
    low, high = key.interval
    shown = f"the 95% interval [{low:+.4f}, {high:+.4f}]"
    if high < 0.0 or low > 0.0:
        side = "worse" if high < 0.0 else "better"
        return f"Resolved: {shown} excludes 0, so the candidate did {side} on this key beyond chance."
    figures = power(key)
    if figures is None:
        return f"Not resolved: {shown} holds 0, and the two runs do not differ on these tasks."
    more = (
        f"About {figures.more_tasks} more paired tasks ({figures.tasks_needed} in all)"
        if figures.more_tasks
        else f"{figures.tasks_needed} paired tasks, no more than compared here,"
    )
    return (
        f"Not resolved: {shown} holds 0. {more} would resolve a difference of this size "
        f"({figures.effect:.4f}) at 80% power."
    )


def _mean(figures: Sequence[PassAt], k: int) -> str:
    return figure(next((each.mean for each in figures if each.k == k), None))


def key_section(key: KeyComparison) -> Html:
    series = [_series("baseline", key.baseline_pass_at), _series("candidate", key.candidate_pass_at)]
    ks = sorted({each.k for each in (*key.baseline_pass_at, *key.candidate_pass_at)})
    passk = join(
        html(
            '<tr><th>pass@{}</th><td class="num">{}</td><td class="num">{}</td></tr>',
            k,
            _mean(key.baseline_pass_at, k),
            _mean(key.candidate_pass_at, k),
        )
        for k in ks
    )
    unmeasured = join(
        html(
            "<li>{} <small>(no attempt in {})</small></li>",
            task.task_id,
            " and ".join(side for side, lacks in (("baseline", task.baseline), ("candidate", task.candidate)) if lacks),
        )
        for task in key.unmeasured[:SHOWN_TASKS]
    )
    return html(
        '<div class="key" data-key="{}"><h3>{}</h3><p class="resolution">{}</p><div class="pair">{}'
        '<table class="figures"><thead><tr><th></th><th>baseline</th><th>candidate</th></tr></thead>'
        "<tbody>{}</tbody></table></div>{}{}{}{}{}</div>",
        key.key,
        key.key,
        resolution(key),
        passk_chart(series, f"pass@k of {key.key}, baseline and candidate"),
        passk,
        _changes("regression", "regressions", "got worse", key.regressions, key),
        _changes("fix", "fixes", "got better", key.fixes, key),
        _tasks("tasks only the baseline has this key for", key.only_baseline),
        _tasks("tasks only the candidate has this key for", key.only_candidate),
        html("<h4>shared tasks not compared</h4><ul>{}</ul>", unmeasured) if key.unmeasured else html(""),
    )


def _series(label: str, figures: Sequence[PassAt]) -> Series:
    return Series(
        label,
        tuple(
            Point(each.k, each.mean, f"{each.mean:.4f} over {each.count} tasks, {each.nan_count} NaN")
            for each in figures
            if each.mean is not None
        ),
    )


def _changes(css: str, kind: str, meaning: str, changes: Sequence[VerdictChange], key: KeyComparison) -> Html:
    if not changes:
        return html('<p class="empty">No {}.</p>', kind)
    rates = {task.task_id: task for task in key.tasks}
    rows = join(
        html(
            '<tr><td class="task-id">{}</td><td><span class="verdict {}">{}</span> → <span class="verdict {}">{}</span>'
            '</td><td class="num">{} → {}</td></tr>',
            change.task_id,
            change.baseline,
            change.baseline,
            change.candidate,
            change.candidate,
            figure(rates[change.task_id].baseline),
            figure(rates[change.task_id].candidate),
        )
        for change in changes[:SHOWN_TASKS]
    )
    more = len(changes) - SHOWN_TASKS
    return html(
        '<h4 class="{}">{} {} ({})</h4><table class="changes {}"><thead><tr><th>task</th><th>verdict</th>'
        "<th>pass rate</th></tr></thead><tbody>{}</tbody></table>{}",
        css,
        len(changes),
        kind,
        meaning,
        kind,
        rows,
        html('<p class="more">and {} more (the JSON API lists every one)</p>', more) if more > 0 else html(""),
    )


def _tasks(title: str, tasks: Sequence[str]) -> Html:
    if not tasks:
        return html("")
    shown = join(html('<li class="task-id">{}</li>', task) for task in tasks[:SHOWN_TASKS])
    more = len(tasks) - SHOWN_TASKS
    return html(
        "<h4>{} ({})</h4><ul>{}</ul>{}",
        title,
        len(tasks),
        shown,
        html('<p class="more">and {} more</p>', more) if more > 0 else html(""),
    )


def _only(comparison: Comparison) -> Html:
    return join(
        [
            _tasks("tasks only the baseline has", comparison.only_baseline_tasks),
            _tasks("tasks only the candidate has", comparison.only_candidate_tasks),
            _tasks("keys only the baseline has", comparison.only_baseline_keys),
            _tasks("keys only the candidate has", comparison.only_candidate_keys),
        ]
    )


def compare_fragments(before: CompareView | None, view: CompareView, now: float) -> list[Fragment]:
    """The head again, and the body when either summary changed since `before` was sent."""
    fragments = [Fragment("compare-head", compare_head(view, now))]
    if before is None or _revisions(before) != _revisions(view):
        fragments.append(Fragment("compare-body", compare_body(view)))
    return fragments


def _revisions(view: CompareView) -> tuple[int | None, int | None]:
    return (
        view.baseline.revision if view.baseline is not None else None,
        view.candidate.revision if view.candidate is not None else None,
    )
