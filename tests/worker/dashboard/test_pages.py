"""The pages as HTML: untrusted text renders as itself, and sections go out when they change."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from html.parser import HTMLParser

from hypothesis import example, given, settings
from hypothesis import strategies as st

from events.models import InputEvent
from projections.compare import KeyComparison, compare
from projections.history import history, run_tasks
from tests.builders import closed, dead, score, scored_run, started, summary_of, task_spec, trial
from tests.projections.examples import BASELINE, CANDIDATE
from tests.worker.dashboard.outputs import latest, outputs
from worker.dashboard.charts import BOTTOM, HEIGHT, TOP
from worker.dashboard.compare_page import compare_page, resolution
from worker.dashboard.listing import RunsQuery, listing
from worker.dashboard.markup import Html, href, html, text
from worker.dashboard.pages import dom_id, run_fragments, run_page, runs_page
from worker.dashboard.task_page import task_page
from worker.dashboard.views import RunRecords, compare_view, run_row, run_view

HOSTILE = "<img src=x onerror=alert(1)>"
Log = list[InputEvent]


class Parsed(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.titles: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)
        self.titles.extend(value for name, value in attrs if name == "title" and value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(page: str) -> Parsed:
    parser = Parsed()
    parser.feed(page)
    parser.close()
    return parser


def closed_run(
    run_id: str, task_id: str, metric: str, label: str, error: str, *, value: float = 1.0
) -> list[InputEvent]:
    """One task, two attempts: one scored `value`, one dead."""
    return [
        started(
            run_id,
            [task_spec(task_id, {f"{metric}.score": "continuous"})],
            attempts_per_task=2,
            labels={label: label},
        ),
        trial(task_id, "a", run_id=run_id),
        score(task_id, "a", metric, {"score": value}, run_id=run_id),
        trial(task_id, "b", "failed", error_type=error, run_id=run_id),
        dead(task_id, "b", metric, run_id=run_id),
        closed(run_id),
    ]


def pages(run_id: str, task_id: str, metric: str, label: str, error: str) -> tuple[str, str, str, str]:
    """The runs page (filtered by the run's label and id), the run's page, the run compared with a
    worse one (`task_id` regressed), and `task_id`'s history over the two runs."""
    records = latest(closed_run(run_id, task_id, metric, label, error))
    worse = latest(closed_run(run_id + "'", task_id, metric, label, error, value=0.0))
    footer = html('<footer id="topics">{}</footer>', "topics")
    runs = runs_page(
        listing([run_row(records)], RunsQuery(labels={label: label}, prefix=run_id), 1),
        now=2_000.0,
        version=3,
        footer=footer,
    )
    run = run_page(run_view(records), now=2_000.0, version=3, footer=footer)
    view = compare_view(run_id, records, worse.run_id, worse)
    assert records.summary is not None
    assert worse.summary is not None
    runs_tasks = [run_tasks(records.summary, 1.0), run_tasks(worse.summary, 2.0)]
    task = task_page(history(runs_tasks, {label: label}, task_id), version=3, footer=footer)
    return runs, run, compare_page(view, now=2_000.0, version=3, footer=footer), task


BENIGN = [parsed(page) for page in pages("run", "task", "reward", "model", "Timeout")]
names = st.text(min_size=1, max_size=40)
metrics = names.filter(lambda name: "." not in name)  # a key is "<metric>.<output>": the first dot ends the metric


@settings(max_examples=60, deadline=None)
@given(run_id=names, task_id=names, metric=metrics, label=names, error=names)
@example(HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE)
@example('"><script>alert(1)</script>', "' onmouseover='x", "</svg><svg onload=alert(1)>", "&amp;", "{}{0}")
def test_untrusted_text_renders_as_itself(run_id: str, task_id: str, metric: str, label: str, error: str) -> None:
    shown = [parsed(page) for page in pages(run_id, task_id, metric, label, error)]
    shown_runs, shown_run, shown_compare, shown_task = shown
    for page, benign in zip(shown, BENIGN, strict=True):
        assert page.tags <= benign.tags
        assert page.attributes <= benign.attributes
    assert run_id in "".join(shown_runs.text)
    assert f"{label}={label} ×" in "".join(shown_runs.text)  # the filter in force
    history_said = "".join(shown_task.text)
    for value in (f"Task {task_id}", run_id, run_id + "'", f"{label}={label}", f"{task_id}{metric}.score1"):
        assert value in history_said  # the task flipped (flaky, then failed) once
    said = "".join(shown_run.text)
    for value in (run_id, task_id, f"{metric}.score", f"{label}={label}", error):
        assert value in said
    assert any(title.startswith("a: passed") for title in shown_run.titles)  # the trial id on hover
    compared = "".join(shown_compare.text)
    for value in (run_id, run_id + "'", f"{task_id}flaky → failed", f"{label}={label}"):
        assert value in compared


def test_a_link_to_a_run_keeps_its_id_whole() -> None:
    link = text(href("/run", id="a/b?c=d&e#f"))
    assert link == "/run?id=a%2Fb%3Fc%3Dd%26e%23f"
    assert dom_id("run", HOSTILE).startswith("run-")
    assert set(dom_id("run", HOSTILE)[4:]) <= set("0123456789abcdef")


def test_html_escapes_what_it_is_given_and_keeps_what_it_made() -> None:
    inner = html("<b>{}</b>", "<i>")
    assert inner == "<b>&lt;i&gt;</b>"
    assert html('<p title="{}">{}</p>', '"x"', inner) == '<p title="&quot;x&quot;"><b>&lt;i&gt;</b></p>'
    assert isinstance(inner, Html)


def test_the_run_page_shows_the_summary_figures_exactly() -> None:
    records = latest(closed_run("r", "t", "reward", "m", "E"))
    assert records.summary is not None
    page = run_page(run_view(records), now=0.0, version=1, footer=html(""))
    for aggregate in records.summary.summary.scores:
        if ".pass@" in aggregate.name:
            k = aggregate.name.rpartition("@")[2]
            assert f'data-key="reward.score" data-k="{k}" data-value="{aggregate.mean!r}"' in page
    assert 'data-key="reward.score" data-verdict="flaky">1<' in page


def test_a_progress_event_resends_only_the_progress_sections() -> None:
    progress, summaries = outputs(closed_run("r", "t", "reward", "m", "E"))
    first = run_view(RunRecords("r", progress=progress[1], progress_at=1.0))
    later = run_view(RunRecords("r", progress=progress[2], progress_at=2.0))
    assert {f.id for f in run_fragments(None, first, 3.0)} == {"run-head", "run-figures", "run-details"}
    assert {f.id for f in run_fragments(first, later, 3.0)} == {"run-head", "run-figures"}
    summarized = run_view(
        RunRecords("r", progress=progress[-1], progress_at=4.0, summary=summaries[-1], summary_at=4.0)
    )
    assert {f.id for f in run_fragments(later, summarized, 5.0)} == {"run-head", "run-figures", "run-details"}
    moved_on = run_view(replace(RunRecords("r", progress=progress[-1], summary=summaries[-1]), progress_at=6.0))
    # The summary's figures stand: a later progress event changes only the head.
    assert {f.id for f in run_fragments(summarized, moved_on, 7.0)} == {"run-head"}


PLOT_HEIGHT = HEIGHT - TOP - BOTTOM


def bars(page: str) -> dict[tuple[str, str], tuple[str, str, float]]:
    """Each error bar of the run page by (chart class, k): its data-low, data-high and the
    drawn bar's length in pixels."""
    found = {}
    for chart, svg in re.findall(r'<figure class="(\w+)">(.*?)</figure>', page):
        for k, low, high, y1, y2 in re.findall(
            r'<g class="interval" data-series="[^"]*" data-k="(\d+)" data-low="([^"]*)" data-high="([^"]*)"'
            r' stroke="[^"]*"><line x1="[^"]*" x2="[^"]*" y1="([^"]*)" y2="([^"]*)"/>',
            svg,
        ):
            found[chart, k] = (low, high, float(y1) - float(y2))
    return found


def test_the_run_page_draws_each_interval_of_pass_at_k_and_pass_hat_k_as_an_error_bar() -> None:
    values = {"t1": (1, 1, 0), "t2": (1, 0, 0), "t3": (0, 0, 0), "t4": (1, 1, 1), "t5": (1,)}
    events: Log = [started(tasks=[task_spec(t, {"reward.score": "continuous"}) for t in values])]
    events += [score(t, f"{t}-{n}", "reward", {"score": v}) for t, vs in values.items() for n, v in enumerate(vs)]
    records = latest([*events, closed()])
    assert records.summary is not None
    page = run_page(run_view(records), now=0.0, version=1, footer=html(""))
    drawn = bars(page)
    statistics = records.summary.statistics["reward.score"]
    for chart, entries in (("passk", statistics.pass_at_k), ("passhatk", statistics.pass_hat_k)):
        for entry in entries:
            assert entry.ci95_low is not None
            assert entry.ci95_high is not None
            low, high, length = drawn[chart, str(entry.k)]
            assert (low, high) == (repr(entry.ci95_low), repr(entry.ci95_high))
            # The plot's height spans 0..1; each end is rounded to tenths of a pixel.
            assert math.isclose(length, (entry.ci95_high - entry.ci95_low) * PLOT_HEIGHT, abs_tol=0.11)
    assert len(drawn) == 6


def test_no_error_bar_below_two_tasks() -> None:
    page = run_page(run_view(latest(closed_run("r", "t", "reward", "m", "E"))), now=0.0, version=1, footer=html(""))
    assert 'class="interval"' not in page
    assert "no interval (fewer than two tasks)" in page
    assert '<figure class="passhatk">' in page


def test_the_two_run_view_says_whether_the_difference_is_resolved() -> None:
    def key_of(baseline: dict[str, list[object]], candidate: dict[str, list[object]]) -> KeyComparison:
        (key,) = compare(
            summary_of(scored_run("base", baseline), "base"), summary_of(scored_run("cand", candidate), "cand")
        ).keys
        return key

    # The example of tests/projections/test_compare.py: t interval [-0.8514, +0.5181]; sd sqrt(5/27), size 1/6.
    assert resolution(key_of(BASELINE, CANDIDATE)) == (
        "Not resolved: the 95% interval [-0.8514, +0.5181] holds 0. About 49 more paired tasks (53 in all) "
        "would resolve a difference of this size (0.1667) at 80% power."
    )
    worse = key_of({"a": [1, 1], "b": [1, 1], "c": [1, 0]}, {"a": [1, 0], "b": [0, 1], "c": [0, 0]})
    assert resolution(worse) == (
        "Resolved: the 95% interval [-0.5000, -0.5000] excludes 0, "
        "so the candidate did worse on this key beyond chance."
    )
    better = key_of({"a": [1, 0], "b": [0, 1], "c": [0, 0]}, {"a": [1, 1], "b": [1, 1], "c": [1, 0]})
    assert resolution(better).startswith(
        "Resolved: the 95% interval [+0.5000, +0.5000] excludes 0, so the candidate did better"
    )
    same = key_of({"a": [1], "b": [0]}, {"a": [1], "b": [0]})
    assert (
        resolution(same)
        == "Not resolved: the 95% interval [+0.0000, +0.0000] holds 0, and the two runs do not differ on these tasks."
    )
    assert resolution(key_of({"a": [1]}, {"a": [0]})) == "Not resolved: 1 paired task, too few for an interval."
    base, cand = (
        latest(scored_run(run_id, attempts)) for run_id, attempts in (("base", BASELINE), ("cand", CANDIDATE))
    )
    page = compare_page(compare_view("base", base, "cand", cand), now=2_000.0, version=1, footer=html(""))
    assert html("{}", resolution(key_of(BASELINE, CANDIDATE))) in page
