"""The gates: did a candidate run do worse than a baseline, per pass@k key?

`decision` turns an interval into PASS, WARN, INCONCLUSIVE or BLOCK, and decides a fixed gate
over two summaries with the exact interval of `exact` or Student's t; `power` says how many
tasks or attempts would settle an undecided key; `live` is the live gate, which decides as
the candidate's events land on the anytime-valid confidence sequences of `sequence`.
"""
