"""The `run.summary` and `run.progress` of a run, assembled from its state.

A revision costs what changed since the last: what each task contributes and the run-wide
structures summed from it are kept in a `SummaryCache`, held beside the run's state (never on
it, never stored), and brought up to date when a summary or progress event asks.
"""
