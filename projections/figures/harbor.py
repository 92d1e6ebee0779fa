"""Harbor's own figures (SEMANTICS.md section 6): its reward labels. Its pass@k, bit for bit
Harbor's (its estimator multiplies in its own order, not section 2's product form, and its
mean adds as Python >= 3.12's `sum` does), is a kernel: `projections.kernels.harbor_pass_at_k`.
"""

from __future__ import annotations

import math


def value_label(value: float) -> str:
    """A value as a reward_stats key: Python's repr, as Harbor's result.json has it, the
    non-finite values too ("nan", "inf", "-inf"; not the wire's "NaN" and "Infinity")."""
    # The usual rewards are spelled out: repr formats a float digit by digit, once per
    # attempt of a summary (0.0 by its sign: -0.0 == 0.0).
    if value == 1.0:
        return "1.0"
    if value == 0.0:
        return "0.0" if math.copysign(1.0, value) > 0.0 else "-0.0"
    return repr(value)
