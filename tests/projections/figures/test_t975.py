"""The t quantiles the fold carries equal the spec's table, and the rule above df 1000."""

from __future__ import annotations

import orjson
import pytest

from projections.figures.t975 import NORMAL_975, T_975, t975
from tests.projections.examples import SPEC

SPEC_TABLE = SPEC / "t975.json"


def test_the_table_is_the_specs_bit_for_bit() -> None:
    spec = orjson.loads(SPEC_TABLE.read_bytes())
    assert list(T_975) == spec["t_975"]
    assert spec["normal_975"] == NORMAL_975


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706204736174694), (2, 4.302652729749462), (9, 2.262157162798205), (1001, 1.959963984540054)],
)
def test_quantiles_by_degrees_of_freedom(df: int, expected: float) -> None:
    assert t975(df) == expected


def test_no_degrees_of_freedom_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one degree of freedom"):
        t975(0)
