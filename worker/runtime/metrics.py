"""What the worker reports on `/metrics`, in Prometheus' text format.

Nothing here runs per event. The processor counts in plain ints (`Processor.counts`); this
collector reads them, the run cache, the consumer's highwaters and the last records'
timestamps when Prometheus scrapes. Only the checkpoint histogram is observed as things
happen, once per checkpoint (a few times a second per partition).

The series, per worker process (`partition`: an events partition the worker owns now;
docs/operations.md, "Health and metrics", has the table):
`evalstream_events_{applied,skipped,redelivered,ignored}_total`,
`evalstream_dead_letters_total{reason}`, `evalstream_outputs_refused_total{stream}` (outputs
the broker refused for good, each dead-lettered as `output-refused`),
`evalstream_consumer_lag{partition}` (highwater
minus the state's next offset), `evalstream_last_event_age_seconds{partition}` (now minus
the Kafka timestamp of the last record handled: it grows on an idle partition too, so alert
on it together with lag), `evalstream_checkpoint_duration_seconds` (histogram),
`evalstream_runs_in_memory`, `evalstream_runs_evicted_total`; from the engine
`evalstream_partitions_fenced_total` (a partition's producer fenced: another worker took it
over, or a transaction ran past its timeout), `evalstream_partitions_redone_total` (a
partition read again from its checkpoint), `evalstream_checkpoints_refused_total` (written
again without what the broker refused), `evalstream_checkpoints_abandoned_total`,
`evalstream_archive_read_retries_total`, `evalstream_runs_parked_total{reason}`,
`evalstream_partition_failures_total` (claims and checkpoints that failed otherwise, each
tried again with a new producer) and `evalstream_partitions_failing` (partitions failing
again and again now: `worker.runtime.engine`, "Failures"); and
prometheus-client's `process_*` and `python_gc_*` collectors.

No label or value comes from the settings, so no credential can reach a metric.

Beside them, the eval's own figures per open run (`worker.runtime.eval_figures`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, GCCollector, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from worker.runtime.engine import EngineCounts
from worker.runtime.processor import Processor

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

CHECKPOINT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""A checkpoint is one transaction: its records' acknowledgements and its commit, tens of
milliseconds on a healthy broker, seconds when it struggles (the flush interval is 0.1 s)."""


class WorkerMetrics(Collector):
    def __init__(
        self,
        processor: Processor,
        engine: EngineCounts,
        highwater: Callable[[int], int | None],
        last_timestamp: Mapping[int, int],
        *,
        clock: Callable[[], float] = time.time,
        store_memory: Callable[[], int] = lambda: 0,
    ) -> None:
        """`highwater`: the consumer's last known highwater of an events partition (None:
        not fetched yet); `last_timestamp`: partition -> Kafka timestamp (ms) of the last
        record handled; `clock`: wall-clock seconds, the timestamps' clock."""
        self.processor = processor
        self.engine = engine
        self.highwater = highwater
        self.last_timestamp = last_timestamp
        self.clock = clock
        self.store_memory = store_memory
        self.registry = CollectorRegistry(auto_describe=False)
        self.checkpoint_seconds = Histogram(
            "evalstream_checkpoint_duration_seconds",
            "Seconds one checkpoint took, from its seal until its transaction was committed and applied",
            buckets=CHECKPOINT_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(self)
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def exposition(self) -> bytes:
        """Every series, in Prometheus' text format (`CONTENT_TYPE`)."""
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        counts = self.processor.counts
        yield CounterMetricFamily("evalstream_events_applied", "Events that changed a run", counts.applied)
        yield CounterMetricFamily(
            "evalstream_events_skipped", "Records read again after a rewind, already in the state", counts.skipped
        )
        yield CounterMetricFamily(
            "evalstream_events_redelivered", "Events whose event_id their run had applied", counts.redelivered
        )
        yield CounterMetricFamily(
            "evalstream_events_ignored", "Valid events that change nothing (a second run.closed)", counts.ignored
        )
        dead = CounterMetricFamily("evalstream_dead_letters", "Messages dead-lettered, by reason", labels=["reason"])
        for reason, count in sorted(counts.dead_lettered.items()):
            dead.add_metric([reason], count)
        yield dead
        refused = CounterMetricFamily(
            "evalstream_outputs_refused", "Outputs the broker refused for good, by stream", labels=["stream"]
        )
        for stream, count in sorted(counts.refused.items()):
            refused.add_metric([stream], count)
        yield refused
        yield from self._engine()
        yield from self._partitions()
        cache = self.processor.cache
        yield GaugeMetricFamily("evalstream_runs_in_memory", "Runs in the run cache", len(cache))
        yield CounterMetricFamily("evalstream_runs_evicted", "Runs that left the run cache", cache.evicted)
        yield GaugeMetricFamily(
            "evalstream_run_cache_bytes",
            "Estimated memory of the runs in the run cache, as of its last eviction",
            cache.held_bytes,
        )
        yield GaugeMetricFamily(
            "evalstream_store_memory_bytes",
            "Memory the local copy of the changelog holds (RocksDB's block caches, write buffers and table readers)",
            self.store_memory(),
        )
        yield from self.processor.progress.figures.collect()

    def _engine(self) -> Iterator[Metric]:
        counts = self.engine
        yield CounterMetricFamily(
            "evalstream_partitions_fenced",
            "Times a partition's producer was fenced: another worker took it over, or a transaction timed out",
            counts.fenced,
        )
        yield CounterMetricFamily(
            "evalstream_partitions_redone", "Times a partition was read again from its checkpoint", counts.redone
        )
        yield CounterMetricFamily(
            "evalstream_checkpoints_refused",
            "Checkpoints written again without what the broker refused",
            counts.refusals,
        )
        yield CounterMetricFamily(
            "evalstream_checkpoints_abandoned",
            "Checkpoints still being written when a revocation's wait was over",
            counts.abandoned,
        )
        yield CounterMetricFamily(
            "evalstream_archive_read_retries",
            "Archive reads asked again because the broker had not answered in time",
            counts.archive_retries,
        )
        parked = CounterMetricFamily("evalstream_runs_parked", "Runs parked, by reason", labels=["reason"])
        for reason, count in sorted(counts.parked.items()):
            parked.add_metric([reason], count)
        yield parked
        yield CounterMetricFamily(
            "evalstream_partition_failures",
            "Claims and checkpoints that failed with no refusal and no fencing, each tried again with a new producer",
            counts.failures,
        )
        yield GaugeMetricFamily(
            "evalstream_partitions_failing",
            "Partitions whose claims or checkpoints have failed again and again, until they succeed",
            len(counts.failing),
        )

    def _partitions(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily("evalstream_consumer_lag", "Records not handled yet", labels=["partition"])
        age = GaugeMetricFamily(
            "evalstream_last_event_age_seconds",
            "Now minus the Kafka timestamp of the last record handled",
            labels=["partition"],
        )
        now = self.clock()
        for partition, state in sorted(self.processor.partitions.items()):
            label = [str(partition)]
            highwater = self.highwater(partition)
            if highwater is not None and state.next_offset is not None:
                lag.add_metric(label, max(0, highwater - state.next_offset))
            stamp = self.last_timestamp.get(partition)
            if stamp is not None:
                age.add_metric(label, max(0.0, now - stamp / 1000))
        yield lag
        yield age
