"""SEMANTICS.md section 4, "Overflow": IEEE 754 doubles, never an error. `range_aggregate`
equals the section's transcription (`tests.projections.reference`) bit for bit on any
values, and a fold of the extremes of a double gives records the output model accepts."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.nonfinite import NONFINITE_STRINGS
from events.outputs import RangeAggregate
from projections.figures.aggregates import range_aggregate
from tests import builders
from tests.builders import summary_of
from tests.projections import reference
from tests.projections.reference import bits
from tests.strategies import EXTREMES, run_logs

INF = math.inf
LARGEST = sys.float_info.max


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """The record with every float as its bits (NaN == NaN) and wire strings read back."""

    def of(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: of(item) for key, item in value.items()}
        if isinstance(value, str) and value in NONFINITE_STRINGS:
            return bits(NONFINITE_STRINGS[value])
        return bits(value) if isinstance(value, float) else value

    return {key: of(value) for key, value in record.items()}


doubles = st.one_of(st.floats(allow_subnormal=True), st.sampled_from([*EXTREMES, INF, -INF, math.nan]))


@given(st.lists(doubles, max_size=12), st.integers(0, 3))
def test_range_aggregate_equals_the_spec_transcription_bit_for_bit(values: list[float], unmeasured: int) -> None:
    total = len(values) + unmeasured
    assert comparable(range_aggregate("x", values, total)) == comparable(reference.range_aggregate("x", values, total))


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([0.0, 1e155], id="the spec's example"),
        pytest.param([1e308, 1e308], id="a sum past the largest double"),
        pytest.param([1e308, 1e308, -1e308], id="overflowed then back: the plain sum stays Infinity"),
        pytest.param([1e308, -1e308, 1e308], id="no overflow in this order"),
        pytest.param([LARGEST, -LARGEST], id="a spread of 2 * LARGEST"),
        pytest.param([-1e308, 1e308, 1e308, 1e308, 1e308, 1e308, 1e308, 1e308, 1e308], id="percentile of Infinity"),
        pytest.param([1e155, -1e155], id="squares overflow around a zero mean"),
        pytest.param([5e-324, -5e-324, 5e-324], id="subnormals"),
        pytest.param([-0.0], id="negative zero"),
        pytest.param([-0.0, 0.0, -0.0], id="zeros of both signs"),
        pytest.param([1.5e-154, 1e-160], id="squares underflow"),
        pytest.param([INF, -INF, math.nan, 1.0], id="non-finite values do not count"),
    ],
)
def test_the_extremes_of_a_double(values: list[float]) -> None:
    record = range_aggregate("x", values, len(values))
    RangeAggregate.model_validate(record)
    assert comparable(record) == comparable(reference.range_aggregate("x", values, len(values)))


def test_the_spec_example_gives_its_figures() -> None:
    """One output with the values 0 and 1e155: sum 1e155, mean 5e154, the spread Infinity."""
    log = [*builders.scored_run("run", {"t": [0, 1e155]})]
    [record] = [record for record in summary_of(log).summary.scores if record.name == "reward.score"]
    assert (record.sum, record.mean) == (1e155, 5e154)
    assert (record.variance, record.std_dev, record.sample_variance, record.sample_std_dev) == ("Infinity",) * 4


def test_what_follows_from_an_overflow_is_what_ieee_gives() -> None:
    """Interpolating between -1e308 and 1e308 is lower + fraction * Infinity: Infinity, and at
    a whole position, where the fraction is 0, NaN (0 * Infinity); the sum overflows first."""
    record = range_aggregate("x", [-1e308, 1e308], 2)
    assert (record["sum"], record["variance"], record["median"]) == (0.0, "Infinity", "Infinity")
    record = range_aggregate("x", [-1e308, -1e308, *[1e308] * 7], 9)
    assert (record["sum"], record["mean"], record["variance"]) == ("-Infinity", "-Infinity", "Infinity")
    assert [record["percentiles"][p] for p in ("p10", "p20", "p30")] == [-1e308, "NaN", 1e308]


@given(run_logs())
def test_a_whole_run_over_the_whole_double_range_folds_to_a_valid_summary(log: list[Any]) -> None:
    summary_of(log)  # validated against events.outputs.RunSummary
