"""The fold's state and `apply`: a run's header and tasks, and how one input event changes them.

`run` holds a run's state and `apply`; `task` one task's state within it; `declarations` what
its `run.started` declares; `key_tallies` the verdict counts of each pass@k key, kept as its
tasks move; `redelivery` the index of the event ids it has applied; `savepoint` the undo of
one step.
"""
