"""How a task's data is packed: the same bytes in memory and in the store.

`records` holds a task's scores of one metric as packed records; `trial_ids` its trial ids as
one string; `positions` the log positions of its events; `fingerprints` the fingerprints of
the events it has applied; `sharing` the one object kept for equal values that many tasks
hold.
"""
