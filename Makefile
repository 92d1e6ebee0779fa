# One entry point per job. Everything installs itself into .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install chromium prometheus test check docs deploy-check unit demo replay-demo bench bench-e2e bench-state bench-soak bench-progress bench-chaos bench-dashboard bench-dashboard-scale bench-gate bench-export clean toxiproxy

# The compiled parts (docs/build.md), built in place by the editable install (setup.py: mypyc for
# the fold, setuptools-rust for the crates), and again whenever one of their sources changed.
FOLD_SOURCES := $(sort $(shell find projections -name '*.py'))
CRATE_SOURCES := $(wildcard events/native/Cargo.* events/native/src/*.rs events/native/src/*/*.rs projections/native/Cargo.* projections/native/src/*.rs projections/native/src/*/*.rs)

$(BIN)/.installed: pyproject.toml setup.py events/builds.py $(FOLD_SOURCES) $(CRATE_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

install: $(BIN)/.installed

## The whole suite: lint, format, types, import layers, the docs site, then every test.
test: check unit

check: install deploy-check docs
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## The documentation site, built as the checks build it (every link must resolve); `$(BIN)/mkdocs serve` to read it.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

## deploy/ checked without Docker or a cluster: each tool ships the rules or schemas it checks against.
deploy-check: install
	$(BIN)/hadolint deploy/Dockerfile
	$(BIN)/check-jsonschema --builtin-schema vendor.compose-spec deploy/compose.yaml
	$(BIN)/kubernetes-validate --strict --quiet -k 1.30.0 deploy/k8s/*.yaml
	$(BIN)/kubernetes-validate --strict --quiet deploy/k8s/*.yaml

unit: install chromium prometheus toxiproxy
	$(BIN)/python -m pytest

## Shopify's Toxiproxy for the network-fault tests, built with Go into a cache folder when missing (worker/local/toxiproxy.py).
toxiproxy: install
	$(BIN)/python -m worker.local.toxiproxy install

## Debian's chromium for the browser tests, when the machine has none (.ci/chromium).
chromium:
	bash .ci/chromium

## Debian's prometheus for the Grafana dashboard's test, when the machine has none (.ci/prometheus).
prometheus:
	bash .ci/prometheus

## A local Kafka broker, the worker, the dashboard (its URL printed), a simulated run streamed live.
demo: install
	bash deploy/demo.sh

## Replay the contract's example log: progress lines, then each run's summary.
replay-demo: install
	$(BIN)/evalstream replay docs/spec/examples/mixed-runs.jsonl --progress --progress-every 10 | $(BIN)/evalstream digest

## Replay benchmark (throughput, memory, apply cost) and end-to-end through a broker and worker.
bench: install
	$(BIN)/python -m bench.replay

bench-e2e: install
	$(BIN)/python -m bench.e2e
	$(BIN)/python -m bench.changelog

## RSS of one worker over 10,000 closed runs, and restart times (~10 minutes).
bench-state: install
	$(BIN)/python -m bench.state

## One worker over a 25-minute stream of runs opening and closing: its RSS by quarter and slope, summaries equal replay's.
bench-soak: install
	$(BIN)/python -m bench.soak --minutes 25

## The CPU share of progress with ten 5,000-task runs open at once.
bench-progress: install
	$(BIN)/python -m bench.progress

## Time from a progress event published to the dashboard's pages showing it, in headless Chromium.
bench-dashboard: install
	$(BIN)/python -m bench.dashboard

## The dashboard's RSS and page times with 1,000 and 10,000 runs on the topics.
bench-dashboard-scale: install
	$(BIN)/python -m bench.dashboard_scale

## The exporters: a 10,000-summary backfill to Parquet and to a real MLflow server, a run's close to its MLflow run (~35 minutes).
bench-export: install
	$(BIN)/python -m bench.export

## The live gate's false-alarm rate under the null and decision time on a planted regression, by simulation;
## then the Inspect manager on real Inspect evals (mockllm): samples not run, false stops (~10 minutes).
bench-gate: install
	$(BIN)/python -m bench.gate
	$(BIN)/python -m bench.inspect_gate

## Every fault scenario at full size (~15 minutes): prints the chaos table.
bench-chaos: install
	$(BIN)/python -m bench.chaos

clean:
	rm -rf $(VENV) .state .mypy_cache .ruff_cache .pytest_cache .hypothesis build site
	find projections -name "*.so" -delete; rm -f projections/compiled.digest projections/native.digest events/_native*.so events/native.digest
