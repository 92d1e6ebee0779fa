"""The figures of SEMANTICS.md, computed from numbers.

`aggregates`: range aggregates and the compensated sum every figure adds with (section 4);
`passk`: pass@k and pass^k per task (sections 2 and 8); `statistics`: their standard errors
and 95% intervals over tasks (section 8); `verdicts` (section 3); `reducers`: the views'
reducers (section 4); `harbor`: Harbor's own pass@k and reward labels (section 6); `t975`:
Student's t for the 95% intervals (section 8).
"""
