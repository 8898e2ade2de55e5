"""A job from its start to its end: admission (limits looked at, slots
taken with the record, the task sent), running a whole job on a worker, and
the reaper that ends jobs whose worker died and runs them again.
"""
