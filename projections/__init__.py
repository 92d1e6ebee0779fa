"""The pure fold: input events in, run state, summaries and progress out. No I/O, no clock."""
