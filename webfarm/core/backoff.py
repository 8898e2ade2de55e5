"""A pause after a lost race, so that writers of one key spread out.

Writers that read a key, change it and cas it back lose to each other in
step when they start together: eight parts of a job flushing at once took
up to 20 tries for one update, and now and then lost it
(bench/contention.py). A random pause, its bound doubling with each loss
("full jitter"), lets one through at a time. The first try never waits.
"""

import random
import time

FIRST = 0.001  # seconds: the bound after one loss, about a busy round trip
MOST = 0.05  # the bound never grows past this: a request may be waiting


def after_lost_race(losses: int) -> None:
    """Sleep before the next try, after `losses` (1 or more) lost in a row."""
    if FIRST > 0:
        time.sleep(random.uniform(0, min(MOST, FIRST * 2 ** (losses - 1))))
