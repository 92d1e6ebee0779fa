"""The Grafana dashboard of live eval runs, built with Grafana's own grafana-foundation-sdk.

    python deploy/grafana/dashboard.py > deploy/grafana/dashboards/evalstream.json

The JSON beside it is this script's output, provisioned by deploy/compose.yaml; a test
(tests/deploy/test_grafana.py) checks that it is, and runs every panel's query against a real
Prometheus scraping a running worker. The series are the worker's (docs/operations.md,
"Grafana"); `$run` is the dashboard's run selector.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders.dashboard import Dashboard, QueryVariable, Row
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.stat import Panel as Stat
from grafana_foundation_sdk.builders.table import Panel as Table
from grafana_foundation_sdk.builders.timeseries import Panel as Timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

PROMETHEUS = DataSourceRef(type_val="prometheus", uid="prometheus")
RUN = '{run=~"$run"}'


def query(expr: str, legend: str, ref: str = "A") -> Dataquery:
    return Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(PROMETHEUS)


def build() -> Dashboard:
    return (
        Dashboard("evalstream: live runs")
        .uid("evalstream-live-runs")
        .tags(["evalstream"])
        .refresh("10s")
        .time("now-1h", "now")
        .with_variable(
            QueryVariable("run")
            .label("run")
            .datasource(PROMETHEUS)
            .query("label_values(evalstream_run_trials_finished, run)")
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )
        .with_row(Row("Open runs"))
        .with_panel(
            Stat()
            .title("Open runs")
            .datasource(PROMETHEUS)
            .span(4)
            .height(4)
            .with_target(query("count(evalstream_run_trials_finished)", "open runs"))
        )
        .with_panel(
            Stat()
            .title("Dead trials, all open runs")
            .datasource(PROMETHEUS)
            .span(4)
            .height(4)
            .unit("percentunit")
            .with_target(
                query("sum(evalstream_run_trials_dead) / clamp_min(sum(evalstream_run_trials_finished), 1)", "dead")
            )
        )
        .with_panel(
            Stat()
            .title("Events applied per second")
            .datasource(PROMETHEUS)
            .span(4)
            .height(4)
            .with_target(query("sum(rate(evalstream_events_applied_total[$__rate_interval]))", "events/s"))
        )
        .with_panel(
            Timeseries()
            .title("Progress: trials finished of expected")
            .datasource(PROMETHEUS)
            .span(12)
            .height(8)
            .unit("percentunit")
            .min(0)
            .max(1)
            .with_target(query(f"evalstream_run_progress_ratio{RUN}", "{{run}}"))
        )
        .with_panel(
            Timeseries()
            .title("pass@1 per key, with its 95% interval")
            .datasource(PROMETHEUS)
            .span(12)
            .height(8)
            .min(0)
            .max(1)
            .with_target(query(f"evalstream_run_pass_at_1{RUN}", "{{run}} {{key}}", "A"))
            .with_target(query(f"evalstream_run_pass_at_1_low{RUN}", "{{run}} {{key}} low", "B"))
            .with_target(query(f"evalstream_run_pass_at_1_high{RUN}", "{{run}} {{key}} high", "C"))
        )
        .with_panel(
            Timeseries()
            .title("Dead trials per run")
            .datasource(PROMETHEUS)
            .span(12)
            .height(8)
            .with_target(query(f"evalstream_run_trials_dead{RUN}", "{{run}} dead", "A"))
            .with_target(query(f"evalstream_run_trials_finished{RUN}", "{{run}} finished", "B"))
        )
        .with_panel(
            Table()
            .title("ETA per run (seconds)")
            .datasource(PROMETHEUS)
            .span(12)
            .height(6)
            .unit("s")
            .with_target(query(f"evalstream_run_eta_seconds{RUN}", "{{run}}").instant())
        )
        .with_row(Row("Workers"))
        .with_panel(
            Timeseries()
            .title("Consumer lag")
            .datasource(PROMETHEUS)
            .span(12)
            .height(6)
            .with_target(query("sum by (instance) (evalstream_consumer_lag)", "{{instance}}"))
        )
    )


def dashboard_json() -> str:
    return JSONEncoder(sort_keys=True, indent=2).encode(build().build()) + "\n"


if __name__ == "__main__":
    print(dashboard_json(), end="")
