"""`statistics`: pass@k and pass^k with standard errors and 95% intervals (SEMANTICS.md 8).

Per eligible key with pass@k entries, keys sorted, `{"tasks", "pass_at_k", "pass_hat_k"}`,
each list one entry per k = 1..the largest n: `{"k", "count", "nan_count", "mean", "stderr",
"ci95_low", "ci95_high"}`, in that key order (the contract's bytes).

An entry is made from its k's column (`projections.figures.passk`: one figure per measured
task) by `projections.kernels.column_figures`: its count, nan_count and mean are the column's
center, the very figures the summary's `<key>.pass@<k>` aggregate takes from it, so they agree
to the bit. The standard error is the
range aggregate's sample standard deviation over sqrt(count): one figure per task, so it is
clustered by task (Miller 2024, "Adding Error Bars to Evals"); the interval is mean +- t x SE
with Student's t at count - 1 degrees of freedom, clipped to [0, 1].
"""

from __future__ import annotations

from typing import Any

Statistics = dict[str, dict[str, Any]]
"""key name -> {"tasks", "pass_at_k", "pass_hat_k"}: JSON-ready, in the contract's key order."""
