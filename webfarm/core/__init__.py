"""The base every app of the farm stands on: the memcached client and what is
built directly on it (sealed values, validated lists, counters, slots, memo,
Django's cache and session backends) and small HTTP helpers. It imports no
other app of this project (tests/unit/test_layers.py)."""
