"""Analysis across runs, from their summaries: two runs compared (`compare`), every task
across a label set's runs (`history`), what a harness must run again (`retry`), and the
gates (`gate`). None of it is on the fold's path.
"""
