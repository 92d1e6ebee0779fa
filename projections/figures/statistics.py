"""`statistics`: pass@k and pass^k with standard errors and 95% intervals (SEMANTICS.md 8).

Per eligible key with pass@k entries, keys sorted, `{"tasks", "pass_at_k", "pass_hat_k"}`,
each list one entry per k = 1..the largest n: `{"k", "count", "nan_count", "mean", "stderr",
"ci95_low", "ci95_high"}`, in that key order (the contract's bytes).

An entry is made from its k's column (`projections.figures.passk`: one figure per measured
task): its count, nan_count and mean are the column's center, the very figures the summary's
`<key>.pass@<k>` aggregate takes from it, so they agree to the bit. The standard error is the
range aggregate's sample standard deviation over sqrt(count): one figure per task, so it is
clustered by task (Miller 2024, "Adding Error Bars to Evals"); the interval is mean +- t x SE
with Student's t at count - 1 degrees of freedom, clipped to [0, 1].
"""

from __future__ import annotations

import math
from typing import Any

from projections.figures.aggregates import Center, Spread
from projections.figures.t975 import t975

Statistics = dict[str, dict[str, Any]]
"""key name -> {"tasks", "pass_at_k", "pass_hat_k"}: JSON-ready, in the contract's key order."""


def entry(k: int, middle: Center, spreads: Spread | None) -> dict[str, Any]:
    """One k's figures from the center and spread of its tasks' figures (the ones without
    a figure count as NaN)."""
    mean = middle.mean
    stderr = low = high = None
    sample_variance = None if spreads is None else spreads.sample_variance
    if mean is not None and sample_variance is not None:
        # float(): C's sqrt of the count as a float, which `math.sqrt` takes an int as too.
        stderr = math.sqrt(sample_variance) / math.sqrt(float(middle.count))
        margin = t975(middle.count - 1) * stderr
        low, high = _clip(mean - margin), _clip(mean + margin)
    return {
        "k": k,
        "count": middle.count,
        "nan_count": middle.nan_count,
        "mean": mean,
        "stderr": stderr,
        "ci95_low": low,
        "ci95_high": high,
    }


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))
