"""A password hasher that writes a line to $HASH_COUNT_FILE for each hash it
computes: every login a web node answers, in every process, can be counted."""

import os
from typing import Any

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class CountingHasher(PBKDF2PasswordHasher):
    # Django's default, so the demo accounts' passwords check as they are;
    # fewer rounds: what is counted is whether a hash is made, not its cost.
    iterations = 1000

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
