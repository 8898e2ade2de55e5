"""Password hashers for the test farms.

`QuickHasher` is Django's default (PBKDF2, so the demo accounts' passwords
check as they are) at a thousand rounds, not a million: Django's advice for
tests. A login in a test farm then costs what a page does, not a third of a
second of a core, which on a loaded machine held a node's threads for seconds
and made the requests queued behind them late (CONTRIBUTING.md, "Password
hashing in the test farms"). `CountingHasher` also writes a line to
$HASH_COUNT_FILE for each hash it computes: every login a web node answers,
in every process, can be counted.
"""

import os
from typing import Any

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickHasher(PBKDF2PasswordHasher):
    iterations = 1000


class CountingHasher(QuickHasher):
    # What is counted is whether a hash is made, not its cost.

    def encode(self, password: str, salt: str, iterations: int | None = None) -> Any:
        path = os.environ.get("HASH_COUNT_FILE")
        if path:
            with open(path, "a") as counted:
                counted.write("hash\n")
        return super().encode(password, salt, iterations)


def hashes_counted(path: str) -> int:
    try:
        with open(path) as counted:
            return sum(1 for _ in counted)
    except FileNotFoundError:
        return 0
